//! An asymmetric fence: a StoreLoad fence split so that the frequent side
//! pays a compiler barrier only and the rare side pays for both.
//!
//! The deque needs a StoreLoad fence on both sides of a race: the owner's
//! pop stores `back` and then loads `front`, a thief loads `front` and
//! then `back`. With a full fence on each side, one of the two always sees
//! the other. But the owner pops a million times for every steal, and the
//! fence is a quarter of a two-worker fork-join's time. Here the frequent
//! side runs `store; compiler barrier; load` (a *light* section) and the
//! rare side calls [`AsymmetricFence::heavy`] between its two loads.
//!
//! On Linux, `heavy` is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`:
//! when it returns, every thread of this process that was running has
//! executed a full memory barrier (the kernel interrupts it to do so),
//! and every other one has been switched out, which is one too. So a
//! light section is either wholly before that barrier (its store is
//! visible to the caller's next load) or its load comes after it (and
//! sees what the caller did before `heavy`). It costs the caller a system
//! call and an interrupt on each core running our threads: about 9 us on
//! the two-vCPU machines this was measured on, so callers must make it
//! rare (the deque's thieves pay it only while the owner is in its fast
//! mode, see `queues/chase_lev.rs`).
//!
//! The process registers for expedited barriers once, at the first
//! [`AsymmetricFence::new`]. Where that fails (an old kernel, a seccomp
//! filter, not Linux, Miri) `new` returns `None` and callers keep their
//! symmetric fences.
//!
//! Under loom the pair is modelled with a mutex: a light section holds it
//! across its store and load, `heavy` takes and drops it, so each light
//! section falls wholly before or wholly after each barrier. The real
//! barrier may also land between the store and the load; that outcome
//! (the store seen, the load fresh) is one the model reaches as well,
//! since loom lets the thief's load see a store that is not ordered
//! before it.

#[cfg(loom)]
use crate::platform::sync::Mutex;

/// The two halves of an asymmetric StoreLoad fence (module docs).
pub(crate) struct AsymmetricFence {
    /// The model's stand-in for the kernel's barrier.
    #[cfg(loom)]
    section: Mutex<()>,
}

impl AsymmetricFence {
    /// The fence, if this process can have one (module docs).
    pub(crate) fn new() -> Option<Self> {
        #[cfg(loom)]
        {
            Some(AsymmetricFence {
                section: Mutex::new(()),
            })
        }
        #[cfg(not(loom))]
        {
            expedited::registered().then_some(AsymmetricFence {})
        }
    }

    /// Run `store`, then `load`, ordered against every `heavy` as if a full
    /// fence stood between them.
    #[inline(always)]
    pub(crate) fn light<R>(&self, store: impl FnOnce(), load: impl FnOnce() -> R) -> R {
        #[cfg(loom)]
        let _section = self.section.lock();
        store();
        // Keeps the compiler from moving the load above the store; the
        // processor's own reordering is what `heavy` undoes.
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        load()
    }

    /// The expensive half: every light section is now either visible to
    /// our later loads or will see our earlier stores. It is also a SeqCst
    /// fence of the caller's, so that a caller need not know whether the
    /// other side ran a light section or a fence of its own.
    #[cold]
    pub(crate) fn heavy(&self) {
        // The kernel's barrier has full fences of its own, but the model's
        // mutex does not: say it once, for both.
        crate::platform::sync::fence(crate::platform::sync::Ordering::SeqCst);
        #[cfg(loom)]
        drop(self.section.lock());
        #[cfg(not(loom))]
        expedited::barrier();
    }
}

/// The kernel's expedited private barrier, where there is one.
#[cfg(not(loom))]
mod expedited {
    #[cfg(all(target_os = "linux", not(miri)))]
    use std::sync::OnceLock;

    // From <linux/membarrier.h>; the libc crate does not carry them.
    #[cfg(all(target_os = "linux", not(miri)))]
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    #[cfg(all(target_os = "linux", not(miri)))]
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    #[cfg(all(target_os = "linux", not(miri)))]
    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        let no_flags: libc::c_long = 0;
        let no_cpu: libc::c_long = 0;
        // SAFETY: membarrier takes integers only (the command, flags, and a
        // CPU id read only with MEMBARRIER_CMD_FLAG_CPU); it touches no
        // memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, no_flags, no_cpu) }
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    pub(super) fn registered() -> bool {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        *REGISTERED.get_or_init(|| membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    pub(super) fn barrier() {
        let result = membarrier(CMD_PRIVATE_EXPEDITED);
        // Registration succeeded before any fence was handed out, and the
        // command cannot fail after it; if it did, a thief would go
        // unsynchronized, which must not pass silently.
        assert_eq!(
            result,
            0,
            "membarrier failed after registration: {}",
            std::io::Error::last_os_error()
        );
    }

    #[cfg(not(all(target_os = "linux", not(miri))))]
    pub(super) fn registered() -> bool {
        false
    }

    #[cfg(not(all(target_os = "linux", not(miri))))]
    pub(super) fn barrier() {
        unreachable!("no asymmetric fence is handed out without the kernel's barrier")
    }
}
