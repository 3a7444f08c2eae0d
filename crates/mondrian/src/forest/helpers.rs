//! Helper threads that share the work of one streamed point with the calling thread.
//!
//! A point-by-point stream hands each point's work (one insertion per tree, some tens of
//! microseconds) to the threads. A pool whose idle workers sleep pays a wake-up for every
//! point, which on a virtual machine costs about what the work does; and the caller sleeps
//! while the pool works. Here the caller runs one share itself and each helper runs another,
//! and an idle helper spins for a short while (a stream's next point comes within
//! microseconds) before it parks.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The payload of a job that panicked, raised again by the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    sleeping: AtomicBool,
    stop: AtomicBool,
}

/// A fixed set of helper threads (see the module doc).
pub(crate) struct Helpers {
    threads: Vec<(Arc<Slot>, JoinHandle<()>)>,
    /// Set while a caller's jobs are posted: the mailboxes serve one caller at a time.
    busy: AtomicBool,
    /// The process that started the threads (a forked child has none of them).
    process: u32,
}

impl Helpers {
    /// Starts `n` helpers; `None` if a thread cannot be started.
    pub(crate) fn start(n: usize) -> Option<Helpers> {
        // Built first, so that if a thread fails to start, dropping it stops the others.
        let mut helpers = Helpers {
            threads: Vec::with_capacity(n),
            busy: AtomicBool::new(false),
            process: std::process::id(),
        };
        for i in 0..n {
            let slot = Arc::new(Slot {
                state: AtomicU8::new(IDLE),
                job: AtomicPtr::new(std::ptr::null_mut()),
                panic: Mutex::new(None),
                sleeping: AtomicBool::new(false),
                stop: AtomicBool::new(false),
            });
            let mine = Arc::clone(&slot);
            let handle = thread::Builder::new()
                .name(format!("mondrian-helper-{i}"))
                .spawn(move || serve(&mine))
                .ok()?;
            helpers.threads.push((slot, handle));
        }
        Some(helpers)
    }

    /// How many shares [`run`](Self::run) takes at most: the helpers' and the caller's.
    pub(crate) fn shares(&self) -> usize {
        self.threads.len() + 1
    }

    /// Runs `jobs[0]` on the calling thread and each other job on a helper, and returns
    /// when all are done. A panic in any job is raised here once all have finished. While
    /// another caller uses the helpers (or in a forked child, which has none), the jobs
    /// run on the calling thread in turn.
    pub(crate) fn run(&self, jobs: &mut [&mut Job<'_>]) {
        if jobs.len() > self.shares()
            || std::process::id() != self.process
            || self.busy.swap(true, Ordering::Acquire)
        {
            jobs.iter_mut().for_each(|job| job());
            return;
        }
        let _release = Release(&self.busy);
        let Some((first, rest)) = jobs.split_first_mut() else {
            return;
        };
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
        let mut helper_panic = None;
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
            if let Some(payload) = slot.panic.lock().ok().and_then(|mut p| p.take()) {
                helper_panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = mine.err().or(helper_panic) {
            resume_unwind(payload);
        }
    }
}

/// Clears the busy flag of [`Helpers`] when `run` ends, by return or by unwinding.
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
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
        if let Err(payload) = ran {
            // Handed to the caller, which raises it: dropping it here could panic again
            // and end this thread before it reports.
            if let Ok(mut panic) = slot.panic.lock() {
                *panic = Some(payload);
            }
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
        let payload = caught.expect_err("the helper's panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"share failed"));
        assert!(done);
        // The helper survives and serves the next call.
        let mut n = 0;
        let mut first = || ();
        let mut second = || n += 1;
        helpers.run(&mut [&mut first, &mut second]);
        assert_eq!(n, 1);
    }

    #[test]
    fn concurrent_callers_each_get_all_their_jobs_run() {
        let helpers = Helpers::start(1).expect("threads");
        let totals: Vec<u64> = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..3)
                .map(|_| {
                    scope.spawn(|| {
                        let mut total = 0u64;
                        for _ in 0..500 {
                            let (mut a, mut b) = (0u64, 0u64);
                            let mut ja = || a += 1;
                            let mut jb = || b += 2;
                            helpers.run(&mut [&mut ja, &mut jb]);
                            total += a + b;
                        }
                        total
                    })
                })
                .collect();
            runs.into_iter()
                .map(|r| r.join().expect("caller"))
                .collect()
        });
        assert_eq!(totals, vec![1500; 3]);
    }
}
