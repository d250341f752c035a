//! The signals glibc reserves for itself (32 and 33 on Linux: thread cancellation and set*id in
//! threaded programs). `retry` is single-threaded and uses neither, so it handles them as any
//! other signal; glibc's `sigaction` refuses them, so they are set with the system call.

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use nix::libc;

    /// The kernel's `struct sigaction` on these architectures.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct KernelSigaction {
        handler: libc::sighandler_t,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }

    /// `rt_sigaction(n, new, old)` as the kernel takes it; false on failure.
    fn rt_sigaction(
        n: i32,
        new: Option<&KernelSigaction>,
        old: Option<&mut KernelSigaction>,
    ) -> bool {
        let new = new.map_or(std::ptr::null(), |a| a as *const KernelSigaction);
        let old = old.map_or(std::ptr::null_mut(), |a| a as *mut KernelSigaction);
        // SAFETY: both pointers are null or point to a struct laid out as the kernel's, and 8 is
        // the size of the kernel's signal set on these architectures.
        unsafe { libc::syscall(libc::SYS_rt_sigaction, n, new, old, 8usize) == 0 }
    }

    /// The signals glibc reserves.
    pub fn reserved() -> std::ops::Range<i32> {
        32..libc::SIGRTMIN()
    }

    /// Sets `n` to its default action. Async-signal-safe.
    pub fn set_default(n: i32) {
        let default = KernelSigaction {
            handler: libc::SIG_DFL,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        rt_sigaction(n, Some(&default), None);
    }

    /// True when `n` is ignored now.
    pub fn is_ignored(n: i32) -> bool {
        let mut old = KernelSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        rt_sigaction(n, None, Some(&mut old)) && old.handler == libc::SIG_IGN
    }

    /// Catches each of `signals` with `handler`, the way glibc installed the handler of `like`
    /// (its flags and the return trampoline the kernel needs, read once), plus `flags`.
    pub fn catch_like(
        signals: std::ops::Range<i32>,
        like: i32,
        handler: libc::sighandler_t,
        flags: libc::c_int,
    ) -> bool {
        let mut model = KernelSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        if !rt_sigaction(like, None, Some(&mut model)) || model.handler != handler {
            return false;
        }
        let action = KernelSigaction {
            handler,
            flags: model.flags | flags as libc::c_ulong,
            restorer: model.restorer,
            mask: 0,
        };
        // Every one is tried, whether or not one before it failed.
        let mut all = true;
        for n in signals {
            all &= rt_sigaction(n, Some(&action), None);
        }
        all
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    use nix::libc;

    pub fn reserved() -> std::ops::Range<i32> {
        0..0
    }

    pub fn set_default(_n: i32) {}

    pub fn is_ignored(_n: i32) -> bool {
        false
    }

    pub fn catch_like(
        _signals: std::ops::Range<i32>,
        _like: i32,
        _handler: libc::sighandler_t,
        _flags: libc::c_int,
    ) -> bool {
        false
    }
}

pub use imp::{catch_like, is_ignored, reserved, set_default};
