//! Execution and completion: the `JobRef` entry point of task nodes, the
//! call of a node's body (a panic fails the node, it does not unwind into
//! the worker), and the completion that releases its successors and picks
//! what this worker runs next: rule 1 (the task the body returned) before
//! rule 2 (a successor it made ready).
//!
//! Invariants:
//! - A ready node is run by one worker, once per readiness (a recycled node
//!   is ready again, as a new job).
//! - A cancelled node, or one whose group is cancelled, is completed
//!   without running its body; a node that did not run to the end
//!   (skipped, or its body panicked) cancels its successors.
//! - A node is freed before its successors and group unit are released
//!   (`free_node`), which is what lets a child live in its continuation's
//!   reserve.

use super::handle::TaskRef;
use super::layout::{Header, header};
use super::ready::{ReadyNode, Remains, cancel_chain, free_node, release_hold, release_unit};
use crate::observe::stats::Rule;
use crate::platform::sync::Ordering;
use crate::platform::unwind;
use crate::task::context::Context;
use crate::task::successors::{Many, Split};
use crate::worker::group::Group;
use crate::worker::thread::{ExecuteFn, JobRef, Next, WorkerThread};
use std::ptr::NonNull;

/// The `JobRef` entry point for task nodes.
#[inline(never)]
pub(super) unsafe fn execute_job(node: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: forwarded: the node is ready and ours, executed once.
    unsafe { execute_node(node.cast(), worker) }
}

/// Run a ready node, complete it, and hand back the next task by rule 1 or
/// rule 2 (the rest of what it made ready is routed to queues).
///
/// The path of a node that runs, returns nothing and has one successor is
/// kept short (a continuation-passing fork starts three nodes); returned
/// tasks, failures and long successor lists go through cold functions.
/// A node that recycles itself, or a successor it made ready, runs next in
/// this same call (rules 1 and 2, counted as the worker's loop counts
/// them) unless a trace is on or an isolation region is entered or left.
///
/// # Safety
/// The caller owns the ready node; it is executed once per readiness.
#[inline]
unsafe fn execute_node(mut node: NonNull<Header>, worker: &WorkerThread) -> Option<Next> {
    'nodes: loop {
        let header = header(node);
        let group_ptr = header.group.load(Ordering::Relaxed);
        // SAFETY: a submitted node's group lives until the node's unit-holding
        // descendant finishes, which is after us. A node never submitted (its
        // handle was dropped) has no group and is cancelled.
        let group = match unsafe { group_ptr.as_ref() } {
            Some(group) if !header.cancelled.load(Ordering::Relaxed) && !group.is_cancelled() => {
                group
            }
            // SAFETY: we own the node.
            _ => return unsafe { complete(node, worker, true, None) },
        };
        loop {
            let mut cx = Context::new(worker, node, group);
            // SAFETY: we own the node; the vtable matches its body type.
            // The body runs as work of its group (`is_cancelled`, nested
            // scopes and runs).
            let returned = match worker.with_cancel_context(group, || {
                unwind::halt_unwinding(|| unsafe { (header.vtable.execute)(node, &mut cx) })
            }) {
                Ok(returned) => returned,
                Err(payload) => {
                    worker.registry().task_panicked(group, payload);
                    // SAFETY: we own the node.
                    return unsafe { complete(node, worker, true, None) };
                }
            };
            // Rule 1: the returned task, if it is ready and may run here.
            let bypass = match returned {
                None => None,
                Some(task) => submit_returned(task, group, worker),
            };
            if !cx.recycle_requested() {
                if bypass.is_some() || worker.tracing() {
                    // SAFETY: we own the node.
                    return unsafe { complete(node, worker, false, bypass) };
                }
                // SAFETY: we own the node.
                return match unsafe { finish(node, worker, false, None) } {
                    // Rule 2 right here, as the worker's loop would run the
                    // successor next (counted, and checked for cancellation
                    // at the top), without a trip through it. (Not into or
                    // out of an isolation region: a region job's wrapper
                    // sets and restores the worker's region around it.)
                    LeftToRun::Successor(ready)
                        if !ready.region().is_isolated() && !worker.region().is_isolated() =>
                    {
                        worker.count_task(Rule::Successor);
                        node = ready.node;
                        continue 'nodes;
                    }
                    // Nothing made ready: rule 3 right here when the loop
                    // would take the deque's newest job next anyway and it
                    // is a task node (a spawned child, in a fork-join).
                    LeftToRun::Nothing => {
                        let job = worker.pop_own_task_in_main_loop(|job| {
                            job.is_plain_run_by(execute_job as ExecuteFn)
                        })?;
                        worker.count_task(Rule::OwnDeque);
                        node = job.pointer().cast();
                        continue 'nodes;
                    }
                    left => left.into_next(),
                };
            }
            if bypass.is_some() || worker.tracing() {
                // SAFETY: we still own the node.
                return Some(unsafe { recycled(node, bypass, worker) });
            }
            // Recycled with nothing returned: rule 1 runs the node again right
            // here, as a new start would (counted, and skipped if cancelled
            // meanwhile), without a trip through the worker's loop. (With a
            // trace on, each run goes through the loop to get its record.)
            worker.count_task(Rule::Returned);
            if header.cancelled.load(Ordering::Relaxed) || group.is_cancelled() {
                // SAFETY: we own the node.
                return unsafe { complete(node, worker, true, None) };
            }
        }
    }
}

/// Submit the task a node returned: the job to run next here if it is
/// ready and may run here (rule 1); routed if it is ready elsewhere.
#[cold]
#[inline(never)]
fn submit_returned(task: TaskRef, group: &Group, worker: &WorkerThread) -> Option<JobRef> {
    let ready = task.submit(group, None, None, worker.region())?;
    if ready.is_local_to(worker.index()) {
        Some(ready.into_job())
    } else {
        ready.route_from(worker);
        None
    }
}

/// A node that asked to run again: it is not completed, and runs next as a
/// child of the continuation it created (if any), which still counts it as
/// pending; a returned task runs before it.
///
/// # Safety
/// The caller owns the node.
unsafe fn recycled(node: NonNull<Header>, bypass: Option<JobRef>, worker: &WorkerThread) -> Next {
    // SAFETY: we still own the node.
    let region = unsafe { (*header(node).meta.get()).region };
    // SAFETY: we still own the node; it is queued or run exactly once.
    let again = unsafe { JobRef::new(node.cast(), execute_job, region) };
    let job = match bypass {
        Some(job) => {
            worker.push(again);
            job
        }
        None => again,
    };
    Next {
        job,
        rule: Rule::Returned,
    }
}

/// What completing a node leaves to run next on this worker. (Not
/// `queues::proxy::Taken`, which is what taking a proxy entry gave.)
enum LeftToRun {
    Nothing,
    /// The task the node returned (rule 1).
    Bypass(JobRef),
    /// A successor it made ready that may run here (rule 2).
    Successor(ReadyNode),
}

impl LeftToRun {
    /// As the worker loop's next job.
    fn into_next(self) -> Option<Next> {
        match self {
            LeftToRun::Nothing => None,
            LeftToRun::Bypass(job) => Some(Next {
                job,
                rule: Rule::Returned,
            }),
            LeftToRun::Successor(ready) => Some(Next {
                job: ready.into_job(),
                rule: Rule::Successor,
            }),
        }
    }
}

/// Complete a node that ran (or was skipped, `failed`): release each
/// successor; the first one made ready that may run here is the next task
/// (rule 2) unless `bypass` (rule 1) came first; the others are routed.
/// Then free the node and release its group unit.
///
/// # Safety
/// The caller owns the node, which is not used afterwards.
#[inline(always)]
unsafe fn finish(
    node: NonNull<Header>,
    worker: &WorkerThread,
    failed: bool,
    bypass: Option<JobRef>,
) -> LeftToRun {
    // SAFETY: we own the node, and it completed: nothing points at it.
    let Remains { successors, unit } = unsafe { free_node(node) };
    let successor = match successors.split() {
        Split::None => None,
        Split::One(only) => release_successor(only, failed, bypass.is_none(), worker),
        Split::Many(all) => release_all(all, failed, bypass.is_none(), worker),
    };
    release_unit(unit);
    match (bypass, successor) {
        (Some(job), _) => LeftToRun::Bypass(job),
        (None, Some(ready)) => LeftToRun::Successor(ready),
        (None, None) => LeftToRun::Nothing,
    }
}

/// [`finish`], with what it leaves to run as the worker loop's next job.
///
/// # Safety
/// As for [`finish`].
#[inline(always)]
unsafe fn complete(
    node: NonNull<Header>,
    worker: &WorkerThread,
    failed: bool,
    bypass: Option<JobRef>,
) -> Option<Next> {
    // SAFETY: forwarded.
    unsafe { finish(node, worker, failed, bypass) }.into_next()
}

/// Release one successor `s` of a completed node: if that made it ready,
/// return it as the next job when `may_take` and it may run here, route
/// it otherwise (or complete it unrun if it is cancelled).
#[inline(always)]
fn release_successor(
    s: NonNull<Header>,
    failed: bool,
    may_take: bool,
    worker: &WorkerThread,
) -> Option<ReadyNode> {
    if failed {
        header(s).cancelled.store(true, Ordering::Relaxed);
    }
    let ready = release_hold(s)?;
    if header(s).cancelled.load(Ordering::Relaxed) {
        // Never runs: complete it (and what it cancels) here.
        cancel_chain(s);
        None
    } else if may_take && ready.is_local_to(worker.index()) {
        Some(ready)
    } else {
        ready.route_from(worker);
        None
    }
}

/// Release the successors of a node with several (most have one or
/// none); the first made ready that may run here is returned when
/// `no_bypass`.
#[cold]
#[inline(never)]
fn release_all(
    all: Many<Header>,
    failed: bool,
    no_bypass: bool,
    worker: &WorkerThread,
) -> Option<ReadyNode> {
    let mut successor = None;
    for &s in all.as_slice() {
        let may_take = no_bypass && successor.is_none();
        if let Some(ready) = release_successor(s, failed, may_take, worker) {
            successor = Some(ready);
        }
    }
    successor
}
