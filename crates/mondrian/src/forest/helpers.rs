//! Helper threads that share the work of one streamed point with the calling thread.
//!
//! A point-by-point stream hands each point's work (one insertion per tree, some tens of
//! microseconds) to the threads. A pool whose idle workers sleep pays a wake-up for every
//! point, which on a virtual machine costs about what the work does; and the caller sleeps
//! while the pool works. Here the caller runs one share itself and each helper runs another,
//! and an idle helper spins for a short while (a stream's next point comes within
//! microseconds) before it parks.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// One share of work. The helper runs it through a pointer whose lifetime is erased; the
/// caller does not return before the helper is done with it.
pub(crate) type Job<'a> = dyn FnMut() + Send + 'a;

const IDLE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;

/// How long an idle helper spins for the next job before it parks.
const SPIN: Duration = Duration::from_micros(500);

/// The mailbox between the caller and one helper.
struct Slot {
    state: AtomicU8,
    /// Points at a `&mut Job` on the caller's stack while `state` is `POSTED`.
    job: AtomicPtr<()>,
    panicked: AtomicBool,
    sleeping: AtomicBool,
    stop: AtomicBool,
}

/// A fixed set of helper threads (see the module doc).
pub(crate) struct Helpers {
    threads: Vec<(Arc<Slot>, JoinHandle<()>)>,
}

impl Helpers {
    /// Starts `n` helpers; `None` if a thread cannot be started.
    pub(crate) fn start(n: usize) -> Option<Helpers> {
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let slot = Arc::new(Slot {
                state: AtomicU8::new(IDLE),
                job: AtomicPtr::new(std::ptr::null_mut()),
                panicked: AtomicBool::new(false),
                sleeping: AtomicBool::new(false),
                stop: AtomicBool::new(false),
            });
            let mine = Arc::clone(&slot);
            let handle = thread::Builder::new()
                .name(format!("mondrian-helper-{i}"))
                .spawn(move || serve(&mine))
                .ok()?;
            threads.push((slot, handle));
        }
        Some(Helpers { threads })
    }

    /// How many shares [`run`](Self::run) takes at most: the helpers' and the caller's.
    pub(crate) fn shares(&self) -> usize {
        self.threads.len() + 1
    }

    /// Runs `jobs[0]` on the calling thread and each other job on a helper, and returns
    /// when all are done. A panic in any job is raised here once all have finished.
    pub(crate) fn run(&self, jobs: &mut [&mut Job<'_>]) {
        let Some((first, rest)) = jobs.split_first_mut() else {
            return;
        };
        assert!(rest.len() <= self.threads.len(), "more jobs than helpers");
        for (job, (slot, handle)) in rest.iter_mut().zip(&self.threads) {
            let job: *mut &mut Job<'_> = job;
            slot.job.store(job.cast(), Ordering::Relaxed);
            slot.state.store(POSTED, Ordering::SeqCst);
            if slot.sleeping.load(Ordering::SeqCst) {
                handle.thread().unpark();
            }
        }
        let mine = catch_unwind(AssertUnwindSafe(first));
        // Every posted job must be finished before the borrows it holds end, even when
        // this thread's own share panicked.
        let mut helper_panicked = false;
        for (slot, _) in &self.threads[..rest.len()] {
            let mut spins = 0u32;
            while slot.state.load(Ordering::Acquire) != DONE {
                spins = spins.saturating_add(1);
                if spins < 1 << 10 {
                    std::hint::spin_loop();
                } else {
                    thread::yield_now();
                }
            }
            slot.state.store(IDLE, Ordering::Relaxed);
            helper_panicked |= slot.panicked.swap(false, Ordering::Relaxed);
        }
        if let Err(payload) = mine {
            resume_unwind(payload);
        }
        assert!(!helper_panicked, "a helper thread panicked");
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        for (slot, handle) in &self.threads {
            slot.stop.store(true, Ordering::SeqCst);
            handle.thread().unpark();
        }
        for (_, handle) in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// A helper's loop: wait for a job (spinning, then parked), run it, report.
fn serve(slot: &Slot) {
    loop {
        let idle_since = Instant::now();
        let mut spins = 0u32;
        loop {
            if slot.stop.load(Ordering::Acquire) {
                return;
            }
            if slot.state.load(Ordering::Acquire) == POSTED {
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if idle_since.elapsed() < SPIN {
                // Lets a thread that waits for the core (more threads than cores) run.
                thread::yield_now();
                continue;
            }
            // Either the caller sees `sleeping` and unparks, or this thread sees the job.
            slot.sleeping.store(true, Ordering::SeqCst);
            if slot.state.load(Ordering::SeqCst) != POSTED && !slot.stop.load(Ordering::SeqCst) {
                thread::park();
            }
            slot.sleeping.store(false, Ordering::SeqCst);
        }
        let job = slot.job.load(Ordering::Relaxed).cast::<&mut Job<'static>>();
        // SAFETY: `run` stored a pointer to a live `&mut Job` before posting, and keeps
        // it alive and untouched until this thread stores `DONE`. The `'static` only
        // erases that borrow's lifetime, which `run` outlives the job by.
        let ran = catch_unwind(AssertUnwindSafe(|| unsafe { (*job)() }));
        if ran.is_err() {
            slot.panicked.store(true, Ordering::Relaxed);
        }
        slot.state.store(DONE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_share_runs_once_per_call() {
        let helpers = Helpers::start(2).expect("threads");
        let mut counts = [0u32; 3];
        for _ in 0..1000 {
            let (a, rest) = counts.split_at_mut(1);
            let (b, c) = rest.split_at_mut(1);
            let mut ja = || a[0] += 1;
            let mut jb = || b[0] += 1;
            let mut jc = || c[0] += 1;
            helpers.run(&mut [&mut ja, &mut jb, &mut jc]);
        }
        assert_eq!(counts, [1000; 3]);
    }

    #[test]
    fn a_helper_panic_reaches_the_caller_after_all_shares_finish() {
        let helpers = Helpers::start(1).expect("threads");
        let mut done = false;
        let caught = catch_unwind(AssertUnwindSafe(|| {
            let mut mine = || done = true;
            let mut theirs = || panic!("share failed");
            helpers.run(&mut [&mut mine, &mut theirs]);
        }));
        assert!(caught.is_err());
        assert!(done);
        // The helper survives and serves the next call.
        let mut n = 0;
        let mut first = || ();
        let mut second = || n += 1;
        helpers.run(&mut [&mut first, &mut second]);
        assert_eq!(n, 1);
    }
}
