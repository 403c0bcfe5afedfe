//! Where a pool's workers start and end: a pool's build on a busy
//! machine starts them on the builder's CPU (`placement::StartingHere`),
//! each notes its thread and, started so, spreads out once its start
//! handler ran; a pool's drop gathers them onto the dropping thread's CPU
//! before they exit, and each gives itself its CPUs back before its exit
//! handler. All of it is placement (`placement.rs`), outside the sleep
//! protocol; under loom nothing is placed.

#[cfg(not(loom))]
use super::pause;
use super::{Sleep, Steer};

impl Sleep {
    /// Worker `index` was told to exit (`sleeping`: while it slept on
    /// the latch), and the caller will block until it has (a join): move
    /// it to the caller's CPU, and wake it if it sleeps.
    pub(crate) fn notify_worker_to_exit(&self, index: usize, sleeping: bool) {
        if !(sleeping && self.wake_thread(index, Steer::ToOurCpu)) {
            // Awake, and on a loaded machine, where it may wait behind a
            // busy neighbour for its time slice: moved at once (the kernel
            // preempts its CPU to migrate it, about 26 us). On an idle
            // machine it sees the latch within microseconds where it is,
            // and moving it only cost the drop time.
            #[cfg(not(loom))]
            if pause::machine_has_neighbour() {
                // Under its sleep lock, as a wake's steer, so that a wake
                // of ours or a poster's takes the note in turn.
                let sleep_state = &self.worker_sleep_states[index];
                let _is_blocked = sleep_state.is_blocked.lock();
                sleep_state.placement.gather();
            }
        }
    }

    /// Worker `index`'s thread starts serving its pool; `started_here`:
    /// on its builder's CPU (`StartingHere`), where the pool's other new
    /// workers were queued too.
    pub(crate) fn worker_started(&self, index: usize, started_here: bool) {
        #[cfg(not(loom))]
        {
            let placement = &self.worker_sleep_states[index].placement;
            placement.note_thread();
            if started_here {
                placement.after_start(self.other_placements(index));
            }
        }
        #[cfg(loom)]
        let _ = (index, started_here);
    }

    /// Worker `index` leaves its pool (its exit handler comes next).
    pub(crate) fn worker_exiting(&self, index: usize) {
        #[cfg(not(loom))]
        self.worker_sleep_states[index].placement.before_exit();
        #[cfg(loom)]
        let _ = index;
    }
}

/// Under loom no thread is placed: nothing is ever narrowed.
#[cfg(loom)]
pub(crate) struct StartingHere;

#[cfg(loom)]
impl StartingHere {
    pub(crate) fn begin() -> Option<StartingHere> {
        None
    }

    pub(crate) fn own_cpus(&self) -> ThreadCpus {
        ThreadCpus
    }
}

#[cfg(loom)]
#[derive(Clone, Copy)]
pub(crate) struct ThreadCpus;

#[cfg(loom)]
impl ThreadCpus {
    pub(crate) fn restore(self) {}
}
