//! How a node sits in memory: a [`Header`] (the scheduler's part) followed
//! by the body in a `#[repr(C)]` [`Node<T>`], with a per-type [`VTable`] for
//! the type-erased call and drop; and the node's allocation, in-place
//! write and drop.
//!
//! The bottom of the task layer: a body is anything that can be run as
//! work of a group on a worker ([`Body`]); the task layer's `Task` is one
//! (`api.rs` supplies the glue), but nothing here knows tasks, handles or
//! contexts.
//!
//! Invariants:
//! - `header` is the first field of a `#[repr(C)]` `Node<T>`, so a
//!   `NonNull<Header>` has its node's address, and the vtable (made for
//!   that `T`) may cast it back.
//! - The `meta` fields are touched only by the node's current owner (see
//!   `run.rs` for how ownership moves); the other header fields are
//!   atomics.
//! - A node's memory goes back the way [`Memory`] says it came: a child in
//!   its continuation's reserve is dropped, never freed, and before it
//!   releases the continuation.

use crate::platform::node_alloc;
use crate::platform::sync::{AtomicBool, AtomicPtr, AtomicU32};
use crate::queues::dispatch::{Dispatch, Priority};
use crate::queues::region::Region;
use crate::task::successors::Successors;
use crate::worker::group::Group;
use crate::worker::thread::WorkerThread;
use std::alloc::Layout;
use std::any::TypeId;
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};

pub(super) const NO_AFFINITY: u32 = u32::MAX;

/// The fields only the node's current owner touches.
pub(super) struct Meta {
    pub(super) dispatch: Dispatch,
    /// The lane of the shared queue an enqueue-dispatch node goes to.
    pub(super) priority: Priority,
    /// `NO_AFFINITY` or a worker index.
    pub(super) affinity: u32,
    /// The isolation region the node runs in (set at submission).
    pub(super) region: Region,
    /// Whether this node holds a unit of its group (see `group.rs`).
    pub(super) holds_unit: bool,
    /// Where the node's memory came from, and so who gives it back.
    pub(super) memory: Memory,
    pub(super) successors: Successors<Header>,
}

/// Where a node's memory came from.
///
/// A continuation-passing fork makes a continuation and a child that
/// finishes before it: the continuation's block has room for that child
/// (`RESERVE_OFFSET`), which saves one allocation and one free a fork.
/// Invariant: a child in a reserve is dropped (never freed) before it
/// releases its continuation, the only release that can let the
/// continuation run and free the block.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Memory {
    /// A block of its own (the layout of its `Node<T>`).
    Own,
    /// A continuation's `PAIR_LAYOUT` block, with room for one child.
    WithReserve,
    /// A child placed in its continuation's reserve.
    InReserve,
}

/// The block of a continuation with room for a child: the continuation at
/// offset 0, the child at `RESERVE_OFFSET`; each at most `RESERVE_OFFSET`
/// bytes and aligned to at most 16 (the node allocator's 256-byte class).
pub(super) const PAIR_LAYOUT: Layout = match Layout::from_size_align(256, 16) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};
pub(super) const RESERVE_OFFSET: usize = 128;

/// Does a node with this layout fit one half of a pair block?
pub(super) const fn fits_half(layout: Layout) -> bool {
    layout.size() <= RESERVE_OFFSET && layout.align() <= PAIR_LAYOUT.align()
}

/// What a node's body can be: something run on a worker as work of a
/// group, which may hand back a node to run next (rule 1) and ask to run
/// again. Implemented for every `Task` (`api.rs`).
pub(crate) trait Body: Send + 'static {
    /// Run the body; `run` says where, and takes back whether it asked to
    /// run again.
    fn run(&mut self, run: &mut RunState<'_>) -> Option<NonNull<Header>>;
}

/// One run of a node's body, as the node layer knows it: the worker, the
/// node, its group, and whether the body asked to run again. The caller
/// keeps it in its own frame, so the body's call is the vtable's last act
/// (a tail call); what a task sees of it is `Context`, a transparent
/// wrapper (`api.rs`).
pub(crate) struct RunState<'w> {
    pub(super) worker: &'w WorkerThread,
    pub(super) node: NonNull<Header>,
    pub(super) group: &'w Group,
    pub(super) recycle: bool,
}

pub(super) struct VTable {
    pub(super) execute: unsafe fn(NonNull<Header>, &mut RunState<'_>) -> Option<NonNull<Header>>,
    pub(super) drop_node: unsafe fn(NonNull<Header>),
    /// The body's type, a constant: `successor_body` compares it without
    /// a call, whichever codegen unit emitted this vtable (a vtable's
    /// address is not one per type).
    pub(super) type_id: TypeId,
    /// Whether the body has drop glue (a node in a reserve whose body has
    /// none needs no call at all when it is freed).
    pub(super) drops_body: bool,
}

/// The scheduler's part of a task node.
pub(crate) struct Header {
    /// Predecessors not yet completed, plus one while a handle holds it.
    pub(super) pending: AtomicU32,
    /// Set when a predecessor failed or the handle was dropped: skip the body.
    pub(super) cancelled: AtomicBool,
    /// The group the node was submitted to; null before submission.
    pub(super) group: AtomicPtr<Group>,
    pub(super) meta: UnsafeCell<Meta>,
    pub(super) vtable: &'static VTable,
}

// A one-shot closure node (header plus a small body) fits the 64-byte
// class of the node allocator: one line to write, submit, run and free.
// (Loom's atomics are larger: the bound is for real builds.)
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Header>() <= 48);

#[repr(C)]
pub(super) struct Node<T> {
    header: Header,
    pub(super) body: UnsafeCell<T>,
}

/// The header fields a new node starts with (the rest start the same for
/// every node: one hold, not cancelled, spawn dispatch, no affinity).
pub(super) struct NodeStart {
    pub(super) successors: Successors<Header>,
    pub(super) region: Region,
    pub(super) group: *mut Group,
    pub(super) holds_unit: bool,
    pub(super) memory: Memory,
}

impl NodeStart {
    /// A node for a handle: no edges, no group until it is submitted.
    const UNSUBMITTED: NodeStart = NodeStart {
        successors: Successors::NONE,
        region: Region::NONE,
        group: ptr::null_mut(),
        holds_unit: false,
        memory: Memory::Own,
    };
}

impl<T: Body> Node<T> {
    const VTABLE: VTable = VTable {
        execute: Self::execute,
        drop_node: Self::drop_node,
        type_id: TypeId::of::<T>(),
        drops_body: std::mem::needs_drop::<T>(),
    };

    pub(super) const LAYOUT: Layout = Layout::new::<Node<T>>();

    #[inline(always)]
    pub(super) fn allocate(body: T) -> NonNull<Header> {
        let memory = node_alloc::allocate(Self::LAYOUT).cast();
        // SAFETY: fresh memory with the layout of `Node<T>`.
        unsafe { Self::write(memory, body, NodeStart::UNSUBMITTED) }
    }

    /// Write a node whose header starts as `start` says into `memory`.
    /// Every field is written once and not read back: a fork writes two
    /// nodes and then uses them at once, and a load of a field still in the
    /// store buffer (written wider, or read back in part) stalls until the
    /// store completes. (Memory first, then the node written into it in
    /// place: built on the stack and copied, it cost a third more
    /// instructions.)
    ///
    /// # Safety
    /// `memory` is unused, valid for a `Node<T>`, and of the kind that
    /// `start.memory` names.
    #[inline(always)]
    pub(super) unsafe fn write(
        memory: NonNull<Node<T>>,
        body: T,
        start: NodeStart,
    ) -> NonNull<Header> {
        // SAFETY: see the function's contract.
        unsafe {
            memory.as_ptr().write(Node {
                header: Header {
                    pending: AtomicU32::new(1),
                    cancelled: AtomicBool::new(false),
                    group: AtomicPtr::new(start.group),
                    meta: UnsafeCell::new(Meta {
                        dispatch: Dispatch::Spawn,
                        priority: Priority::Normal,
                        affinity: NO_AFFINITY,
                        region: start.region,
                        holds_unit: start.holds_unit,
                        memory: start.memory,
                        successors: start.successors,
                    }),
                    vtable: &Self::VTABLE,
                },
                body: UnsafeCell::new(body),
            })
        };
        // `header` is the first field of a repr(C) struct: same address.
        memory.cast()
    }

    unsafe fn execute(node: NonNull<Header>, run: &mut RunState<'_>) -> Option<NonNull<Header>> {
        // SAFETY: the caller owns the running node (pending reached zero, or
        // it is being re-run after a recycle), so nobody else accesses the
        // body; `node` was made by `allocate::<T>`, so the cast is right.
        let body = unsafe { &mut *node.cast::<Node<T>>().as_ref().body.get() };
        body.run(run)
    }

    /// Drop the node, and give its memory back unless it lies in its
    /// continuation's reserve (the continuation's block goes back with it).
    unsafe fn drop_node(node: NonNull<Header>) {
        // SAFETY: the caller owns the node and nothing points at it any more
        // (it completed or was cancelled with no predecessor left).
        let memory = unsafe { (*header(node).meta.get()).memory };
        let node = node.cast::<Node<T>>();
        // SAFETY: as above; the node was made by `write`, into memory of
        // the kind its header names.
        unsafe {
            std::ptr::drop_in_place(node.as_ptr());
            match memory {
                Memory::Own => node_alloc::release(node.cast(), Self::LAYOUT),
                Memory::WithReserve => node_alloc::release(node.cast(), PAIR_LAYOUT),
                Memory::InReserve => {}
            }
        }
    }
}

/// A node's header: the node layer's one way from a raw node pointer to
/// its fields (a safe function, for the reason its safety comment gives).
#[inline]
pub(super) fn header<'a>(node: NonNull<Header>) -> &'a Header {
    // SAFETY: every NonNull<Header> in `node` points at a live node:
    // handles and ready nodes own theirs, and successor pointers are kept
    // alive by the pending count they are part of.
    unsafe { node.as_ref() }
}
