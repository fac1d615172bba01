//! Concurrent invocations of one function, as Lambda serves them: on demand,
//! one execution environment per invocation in flight. The runtime interface
//! emulator serves one invocation at a time (two at once crash it), which is
//! also Lambda's model, so an environment here is one emulator process with its
//! function, in its own cgroup.
//!
//! Environments are started when an invocation finds none free, up to the
//! pool's size; each new one is a real cold start (its init duration is
//! reported by [`Pool::cold_starts`]). An invocation beyond the size waits for
//! a free environment, or, for a function with reserved concurrency in the
//! template, is throttled with Lambda's `TooManyRequestsException` (HTTP 429),
//! as Lambda throttles past a reserved limit.
//!
//! On Lambda Managed Instances ([`Pool::of_managed_instances`]) one
//! environment serves up to `PerExecutionEnvironmentMaxConcurrency`
//! invocations at once: the pool has one environment with that many slots.
//! An invocation past them waits for a free slot (at most [`MAX_WAIT`]), then
//! is throttled, as on demand past the size.

use crate::cgroup::Limits;
use crate::emulator::{Emulator, Invocation};
use crate::managed_instances::ManagedInstances;
use crate::template::Function;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What an invocation asks for and gets back: the emulator's, which an
/// [`Environment`] takes and answers too.
pub use crate::emulator::{Invoked, Options};

/// The variable that sizes pools: most environments per function (default
/// [`DEFAULT_SIZE`]) for functions without reserved concurrency.
pub const SIZE_SETTING: &str = "LOCAL_CONCURRENCY";
/// Environments per function unless [`SIZE_SETTING`] says otherwise: enough to
/// run invocations side by side on a laptop's cores without starting a process
/// per poller.
pub const DEFAULT_SIZE: usize = 2;
/// Most environments a pool may have (each is a process, and a cgroup).
pub const MAX_SIZE: usize = 64;
/// The longest an invocation waits for a free environment before it is
/// answered as Lambda answers past its concurrency (`TooManyRequestsException`):
/// Lambda's longest timeout, so a wait outlasts any invocation ahead of it.
pub const MAX_WAIT: Duration = Duration::from_secs(900);

/// What happens to an invocation when every environment is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// It waits for one to be free.
    Wait,
    /// It is refused at once with Lambda's `TooManyRequestsException`.
    Throttle,
}

/// How many environments a function gets, and what happens past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Most environments at once.
    pub environments: usize,
    /// Past them.
    pub overflow: Overflow,
}

impl Size {
    /// The size for `function`: its reserved concurrency, throttled past it, as
    /// on Lambda; otherwise `setting` environments, waited for past them.
    pub fn of(function: &Function, setting: usize) -> Self {
        match function.reserved_concurrency {
            Some(reserved) => Self {
                environments: usize::try_from(reserved).unwrap_or(MAX_SIZE),
                overflow: Overflow::Throttle,
            },
            None => Self {
                environments: setting,
                overflow: Overflow::Wait,
            },
        }
    }
}

/// [`SIZE_SETTING`], or [`DEFAULT_SIZE`] when it is unset.
pub fn size_setting() -> Result<usize, String> {
    match std::env::var(SIZE_SETTING) {
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_SIZE),
        Ok(text) => parse_size(&text),
        Err(e) => Err(format!("{SIZE_SETTING}: {e}")),
    }
}

/// A pool size given as text (a setting or a flag): 1 to [`MAX_SIZE`].
pub fn parse_size(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|n| (1..=MAX_SIZE).contains(n))
        .ok_or_else(|| format!("the concurrency must be a whole number from 1 to {MAX_SIZE}"))
}

/// Lambda's answer to an invocation past a function's reserved concurrency.
pub fn too_many_requests() -> Invocation {
    Invocation {
        status: 429,
        body: serde_json::json!({
            "Reason": "ReservedFunctionConcurrentInvocationLimitExceeded",
            "Type": "User",
            "message": "Rate Exceeded.",
        })
        .to_string(),
    }
}

/// One execution environment: serves one invocation at a time, or, in a
/// pool with more slots ([`Pool::with_slots`]), that many at once.
pub trait Environment: Send + Sync {
    /// Invoke the function in this environment with `payload`.
    fn invoke(&self, payload: &[u8]) -> Result<Invocation, String>;

    /// [`Environment::invoke`] with `options`; by default they are ignored.
    fn invoke_with(&self, payload: &[u8], options: &Options) -> Result<Invoked, String> {
        let _ = options;
        self.invoke(payload).map(|invocation| Invoked {
            invocation,
            log: None,
        })
    }

    /// Whether the environment cannot serve again although it answered (its
    /// process is gone): the pool retires it. By default never.
    fn ended(&self) -> bool {
        false
    }
}

impl Environment for Emulator {
    fn invoke(&self, payload: &[u8]) -> Result<Invocation, String> {
        Emulator::invoke(self, payload)
    }

    fn invoke_with(&self, payload: &[u8], options: &Options) -> Result<Invoked, String> {
        Emulator::invoke_with(self, payload, options)
    }

    fn ended(&self) -> bool {
        Emulator::ended(self)
    }
}

/// Starts environment number `n` (from 0).
type Starter<E> = Box<dyn Fn(usize) -> Result<E, String> + Send + Sync>;

/// A function's environments.
pub struct Pool<E = Emulator> {
    size: Size,
    /// Invocations one environment serves at once (1 on demand).
    slots: usize,
    max_wait: Duration,
    start: Starter<E>,
    state: Mutex<State<E>>,
    freed: Condvar,
}

struct State<E> {
    /// Environments started and not retired, the most recently used last.
    environments: Vec<Entry<E>>,
    /// Environments being started.
    starting: usize,
    /// Environments retired and being stopped: their places are free once
    /// they are.
    stopping: usize,
}

impl<E> State<E> {
    /// Environments started (serving, free, starting or being stopped).
    fn started(&self) -> usize {
        self.environments.len() + self.starting + self.stopping
    }

    /// The environments serving no invocation, the most recently used last.
    fn idle(&self) -> impl Iterator<Item = &E> {
        self.environments
            .iter()
            .filter(|entry| entry.in_flight == 0)
            .map(|entry| entry.environment.as_ref())
    }
}

/// An environment and its invocations in flight.
struct Entry<E> {
    environment: Arc<E>,
    in_flight: usize,
}

impl<E> std::fmt::Debug for Pool<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("size", &self.size)
            .field("slots", &self.slots)
            .finish()
    }
}

impl Pool<Emulator> {
    /// A pool of `size` emulators running `bootstrap` as `spec` declares it
    /// (see [`Emulator::start_with`]); environment `n` writes its output to
    /// `log` with `.n` before the extension. No process starts before the
    /// first invocation.
    pub fn of_emulators(
        rie: &Path,
        bootstrap: &Path,
        spec: &Function,
        extra_env: &[(&str, &str)],
        log: &Path,
        size: Size,
        limits: Limits,
    ) -> Self {
        let (rie, bootstrap, spec) = (rie.to_path_buf(), bootstrap.to_path_buf(), spec.clone());
        let extra_env: Vec<(String, String)> = extra_env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let log = log.to_path_buf();
        Self::new(
            size,
            Box::new(move |n| {
                let env: Vec<(&str, &str)> = extra_env
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                Emulator::start_with(&rie, &bootstrap, &spec, &env, &numbered(&log, n), limits)
            }),
        )
    }

    /// A pool of one Lambda Managed Instances environment of `spec`
    /// ([`Emulator::start_managed`]) with `managed.max_concurrency` slots;
    /// invocations past them wait for a free slot. Its output goes to `log`
    /// with `.n` before the extension (`n` counts environments started, a
    /// new one after one that did not answer). No process starts before the
    /// first invocation, or [`Pool::provision`] (what Lambda does: the
    /// runner provisions).
    pub fn of_managed_instances(
        rie: &Path,
        bootstrap: &Path,
        spec: &Function,
        managed: ManagedInstances,
        extra_env: &[(&str, &str)],
        log: &Path,
        limits: Limits,
    ) -> Self {
        let (rie, bootstrap, spec) = (rie.to_path_buf(), bootstrap.to_path_buf(), spec.clone());
        let extra_env: Vec<(String, String)> = extra_env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let log = log.to_path_buf();
        let size = Size {
            environments: 1,
            overflow: Overflow::Wait,
        };
        Self::new(
            size,
            Box::new(move |n| {
                let env: Vec<(&str, &str)> = extra_env
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                Emulator::start_managed(
                    &rie,
                    &bootstrap,
                    &spec,
                    managed,
                    &env,
                    &numbered(&log, n),
                    limits,
                )
            }),
        )
        .with_slots(usize::try_from(managed.max_concurrency).unwrap_or(1))
    }

    /// The init duration of each idle environment, in ms, in the order they
    /// were last used (`None`: not reported yet).
    pub fn cold_starts(&self) -> Vec<Option<f64>> {
        self.state()
            .idle()
            .map(Emulator::init_duration_ms)
            .collect()
    }

    /// The highest peak memory of the idle environments' cgroups (emulator
    /// and function), or `None` where limits are not enforced.
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        self.state()
            .idle()
            .filter_map(Emulator::peak_memory_bytes)
            .max()
    }

    /// The lowest memory limit of the idle environments' cgroups, or `None`
    /// where limits are not enforced.
    pub fn memory_limit_bytes(&self) -> Option<u64> {
        self.state()
            .idle()
            .filter_map(Emulator::memory_limit_bytes)
            .min()
    }

    /// The out-of-memory kills in the idle environments' cgroups, summed, or
    /// `None` where none counts them.
    pub fn oom_kills(&self) -> Option<u64> {
        self.state()
            .idle()
            .filter_map(Emulator::oom_kills)
            .reduce(u64::saturating_add)
    }

    /// Everything the idle environments printed, one after the other.
    pub fn logs(&self) -> String {
        self.state().idle().map(Emulator::logs).collect()
    }

    /// [`Pool::logs`] once `done` holds for them, or as they are after 5 s:
    /// a function's own lines reach the log through a pipe of their own, so
    /// the last may land just after the emulator's answer.
    pub fn logs_when(&self, done: impl Fn(&str) -> bool) -> String {
        crate::emulator::logs_when(|| self.logs(), done)
    }

    /// The process ids of the idle environments' emulators.
    pub fn pids(&self) -> Vec<u32> {
        self.state().idle().map(Emulator::pid).collect()
    }
}

/// `dir/name.ext` as `dir/name.n.ext`.
fn numbered(log: &Path, n: usize) -> PathBuf {
    let stem = log
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match log.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    log.with_file_name(name)
}

impl<E: Environment> Pool<E> {
    /// A pool of `size` environments started by `start`, each serving one
    /// invocation at a time.
    pub fn new(size: Size, start: Starter<E>) -> Self {
        Self {
            size,
            slots: 1,
            max_wait: MAX_WAIT,
            start,
            state: Mutex::new(State {
                environments: Vec::new(),
                starting: 0,
                stopping: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// The same pool, an invocation waiting at most `max_wait` for a free
    /// environment (default [`MAX_WAIT`]).
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The same pool, each environment serving up to `slots` invocations at
    /// once (Lambda Managed Instances; at least 1).
    pub fn with_slots(mut self, slots: usize) -> Self {
        self.slots = slots.max(1);
        self
    }

    /// Invoke the function with `payload` in a free environment (started if
    /// none is free and the size allows). Past the size: waits (at most
    /// [`MAX_WAIT`]), or answers [`too_many_requests`].
    pub fn invoke(&self, payload: impl AsRef<[u8]>) -> Result<Invocation, String> {
        self.invoke_with(payload.as_ref(), &Options::default())
            .map(|invoked| invoked.invocation)
    }

    /// [`Pool::invoke`] with `options`. An environment that did not answer
    /// (`Err`: its emulator is gone or stuck), or that answered and ended
    /// ([`Environment::ended`]), is retired, not reused: its place goes to a
    /// fresh one at a later invocation (invocations it still serves end as
    /// they end).
    pub fn invoke_with(&self, payload: &[u8], options: &Options) -> Result<Invoked, String> {
        let environment = match self.take()? {
            Some(environment) => environment,
            None => {
                return Ok(Invoked {
                    invocation: too_many_requests(),
                    log: None,
                });
            }
        };
        let answer = environment.invoke_with(payload, options);
        let mut state = self.state();
        let at = state
            .environments
            .iter()
            .position(|entry| Arc::ptr_eq(&entry.environment, &environment));
        if let Some(at) = at {
            let mut entry = state.environments.remove(at);
            if answer.is_ok() && !environment.ended() {
                entry.in_flight -= 1;
                state.environments.push(entry);
            } else {
                // Stopped outside the lock (once its last invocation lets it
                // go); its place is free after that.
                state.stopping += 1;
                drop(state);
                drop(entry);
                drop(environment);
                self.state().stopping -= 1;
                self.freed.notify_one();
                return answer;
            }
        }
        drop(state);
        drop(environment);
        self.freed.notify_one();
        answer
    }

    /// A free slot of an environment (the most recently used one with one),
    /// of a new one, or `None` when throttled.
    fn take(&self) -> Result<Option<Arc<E>>, String> {
        let give_up = Instant::now() + self.max_wait;
        let mut state = self.state();
        loop {
            let free = state
                .environments
                .iter_mut()
                .rev()
                .find(|entry| entry.in_flight < self.slots);
            if let Some(entry) = free {
                entry.in_flight += 1;
                return Ok(Some(Arc::clone(&entry.environment)));
            }
            if state.started() < self.size.environments {
                let n = state.started();
                state.starting += 1;
                drop(state);
                let started = (self.start)(n);
                let mut state = self.state();
                state.starting -= 1;
                return match started {
                    Ok(environment) => {
                        let environment = Arc::new(environment);
                        state.environments.push(Entry {
                            environment: Arc::clone(&environment),
                            in_flight: 1,
                        });
                        drop(state);
                        if self.slots > 1 {
                            // Its other slots are free for those waiting.
                            self.freed.notify_all();
                        }
                        Ok(Some(environment))
                    }
                    Err(e) => {
                        drop(state);
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if self.size.overflow == Overflow::Throttle || left.is_zero() {
                return Ok(None);
            }
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// Start the pool's environments now, before any invocation, as Lambda
    /// Managed Instances start a function's environments before it is
    /// invoked (no cold start on the invocation's path); those started
    /// already count. On demand environments start as invocations need them:
    /// this is for [`Pool::of_managed_instances`]'s.
    pub fn provision(&self) -> Result<(), String> {
        loop {
            let mut state = self.state();
            if state.started() >= self.size.environments {
                return Ok(());
            }
            let n = state.started();
            state.starting += 1;
            drop(state);
            let started = (self.start)(n);
            let mut state = self.state();
            state.starting -= 1;
            let provisioned = started.map(|environment| {
                // The least recently used: busy environments are taken first.
                state.environments.insert(
                    0,
                    Entry {
                        environment: Arc::new(environment),
                        in_flight: 0,
                    },
                );
            });
            drop(state);
            self.freed.notify_all();
            provisioned?;
        }
    }

    /// Environments started so far.
    pub fn started(&self) -> usize {
        self.state().started()
    }

    /// Environments serving (or starting for) an invocation now.
    pub fn busy(&self) -> usize {
        let state = self.state();
        state.started() - state.idle().count()
    }

    /// Invocations in flight now (environments starting count one each).
    pub fn in_flight(&self) -> usize {
        let state = self.state();
        state.starting
            + state
                .environments
                .iter()
                .map(|entry| entry.in_flight)
                .sum::<usize>()
    }

    /// The pool's size.
    pub fn size(&self) -> Size {
        self.size
    }

    /// Invocations one environment serves at once.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Most invocations the pool serves at once: its environments times their
    /// slots (what an event source's pollers can keep busy).
    pub fn capacity(&self) -> usize {
        self.size.environments.saturating_mul(self.slots)
    }

    fn state(&self) -> MutexGuard<'_, State<E>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// What the fake environments share: how many invocations are in flight,
    /// the most there were, and when an invocation may end.
    #[derive(Default)]
    struct Shared {
        in_flight: AtomicUsize,
        most_in_flight: AtomicUsize,
        /// Invocations end once this many were in flight at once...
        end_at_in_flight: AtomicUsize,
        /// ...or once released, or after [`GIVE_UP`] (so that a wrong pool
        /// fails the test instead of hanging it).
        released: AtomicBool,
    }

    const GIVE_UP: Duration = Duration::from_secs(5);

    struct Fake {
        id: usize,
        shared: Arc<Shared>,
    }

    impl Environment for Fake {
        fn invoke(&self, _: &[u8]) -> Result<Invocation, String> {
            let s = &self.shared;
            let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            s.most_in_flight.fetch_max(now, Ordering::SeqCst);
            let started = Instant::now();
            while !s.released.load(Ordering::SeqCst) && started.elapsed() < GIVE_UP {
                if s.in_flight.load(Ordering::SeqCst) >= s.end_at_in_flight.load(Ordering::SeqCst) {
                    // Reached once: every invocation may end.
                    s.released.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            s.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(Invocation {
                status: 200,
                body: format!("{{\"environment\":{}}}", self.id),
            })
        }
    }

    fn pool(environments: usize, overflow: Overflow, shared: &Arc<Shared>) -> Pool<Fake> {
        let shared = Arc::clone(shared);
        Pool::new(
            Size {
                environments,
                overflow,
            },
            Box::new(move |id| {
                Ok(Fake {
                    id,
                    shared: Arc::clone(&shared),
                })
            }),
        )
    }

    #[test]
    fn concurrent_invocations_each_get_an_environment_of_their_own() {
        // Each invocation ends only once three are in flight at once.
        let shared = Arc::new(Shared::default());
        shared.end_at_in_flight.store(3, Ordering::SeqCst);
        let pool = pool(3, Overflow::Wait, &shared);
        let mut answers: Vec<String> = std::thread::scope(|s| {
            let calls: Vec<_> = (0..3).map(|_| s.spawn(|| pool.invoke("{}"))).collect();
            calls
                .into_iter()
                .map(|c| c.join().expect("thread").expect("answer").body)
                .collect()
        });
        assert_eq!(shared.most_in_flight.load(Ordering::SeqCst), 3);
        answers.sort();
        answers.dedup();
        assert_eq!(answers.len(), 3, "one environment per invocation in flight");
        assert_eq!(pool.started(), 3);
    }

    #[test]
    fn an_environment_with_slots_serves_that_many_invocations_at_once() {
        // Each invocation ends only once four are in flight at once.
        let shared = Arc::new(Shared::default());
        shared.end_at_in_flight.store(4, Ordering::SeqCst);
        let pool = pool(1, Overflow::Wait, &shared).with_slots(4);
        assert_eq!((pool.slots(), pool.capacity()), (4, 4));
        let answers: Vec<String> = std::thread::scope(|s| {
            let calls: Vec<_> = (0..4).map(|_| s.spawn(|| pool.invoke("{}"))).collect();
            calls
                .into_iter()
                .map(|c| c.join().expect("thread").expect("answer").body)
                .collect()
        });
        assert_eq!(shared.most_in_flight.load(Ordering::SeqCst), 4);
        assert!(
            answers.iter().all(|a| a == r#"{"environment":0}"#),
            "{answers:?}"
        );
        assert_eq!((pool.started(), pool.busy(), pool.in_flight()), (1, 0, 0));
    }

    #[test]
    fn past_its_slots_an_invocation_waits_then_is_throttled() {
        let shared = Arc::new(Shared::default());
        shared.end_at_in_flight.store(usize::MAX, Ordering::SeqCst);
        let pool = pool(1, Overflow::Wait, &shared)
            .with_slots(2)
            .with_max_wait(Duration::from_millis(50));
        std::thread::scope(|s| {
            let busy: Vec<_> = (0..2).map(|_| s.spawn(|| pool.invoke("{}"))).collect();
            let first = Instant::now();
            while shared.in_flight.load(Ordering::SeqCst) < 2 && first.elapsed() < GIVE_UP {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!((pool.in_flight(), pool.busy()), (2, 1));
            let waited = pool.invoke("{}").expect("an answer");
            shared.released.store(true, Ordering::SeqCst);
            assert_eq!(waited.status, 429);
            for call in busy {
                assert_eq!(call.join().expect("thread").expect("answer").status, 200);
            }
        });
        // A wait that ends in time gets the slot freed meanwhile.
        assert_eq!(pool.invoke("{}").expect("answer").status, 200);
        assert_eq!(pool.started(), 1);
    }

    #[test]
    fn a_provisioned_environment_is_started_before_any_invocation() {
        let shared = Arc::new(Shared::default());
        shared.released.store(true, Ordering::SeqCst);
        let pool = pool(1, Overflow::Wait, &shared).with_slots(3);
        pool.provision().expect("provisioned");
        assert_eq!((pool.started(), pool.busy(), pool.in_flight()), (1, 0, 0));
        pool.provision().expect("nothing more to start");
        assert_eq!(pool.started(), 1);
        assert_eq!(
            pool.invoke("{}").expect("answer").body,
            r#"{"environment":0}"#
        );
        let failing: Pool<Fake> = Pool::new(
            Size {
                environments: 1,
                overflow: Overflow::Wait,
            },
            Box::new(|_| Err("no emulator".to_owned())),
        );
        assert_eq!(failing.provision(), Err("no emulator".to_owned()));
        assert_eq!(failing.started(), 0);
    }

    #[test]
    fn past_the_size_invocations_wait_for_a_free_environment() {
        let shared = Arc::new(Shared::default());
        shared.end_at_in_flight.store(2, Ordering::SeqCst);
        let pool = pool(2, Overflow::Wait, &shared);
        std::thread::scope(|s| {
            let calls: Vec<_> = (0..8).map(|_| s.spawn(|| pool.invoke("{}"))).collect();
            let first = Instant::now();
            while shared.most_in_flight.load(Ordering::SeqCst) < 2 && first.elapsed() < GIVE_UP {
                std::thread::sleep(Duration::from_millis(1));
            }
            shared.released.store(true, Ordering::SeqCst);
            for call in calls {
                assert_eq!(call.join().expect("thread").expect("answer").status, 200);
            }
        });
        assert_eq!(pool.started(), 2);
        assert_eq!(shared.most_in_flight.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_wait_for_a_free_environment_ends_with_lambdas_throttling_answer() {
        let shared = Arc::new(Shared::default());
        shared.end_at_in_flight.store(usize::MAX, Ordering::SeqCst);
        let pool = pool(1, Overflow::Wait, &shared).with_max_wait(Duration::from_millis(50));
        std::thread::scope(|s| {
            let busy = s.spawn(|| pool.invoke("{}"));
            let first = Instant::now();
            while shared.in_flight.load(Ordering::SeqCst) < 1 && first.elapsed() < GIVE_UP {
                std::thread::sleep(Duration::from_millis(1));
            }
            let waited = pool.invoke("{}").expect("an answer");
            shared.released.store(true, Ordering::SeqCst);
            assert_eq!(waited.status, 429);
            assert_eq!(busy.join().expect("thread").expect("answer").status, 200);
        });
    }

    #[test]
    fn past_reserved_concurrency_an_invocation_is_throttled_as_on_lambda() {
        let shared = Arc::new(Shared::default());
        shared.end_at_in_flight.store(usize::MAX, Ordering::SeqCst);
        let pool = pool(1, Overflow::Throttle, &shared);
        std::thread::scope(|s| {
            let busy = s.spawn(|| pool.invoke("{}"));
            let first = Instant::now();
            while shared.in_flight.load(Ordering::SeqCst) < 1 && first.elapsed() < GIVE_UP {
                std::thread::sleep(Duration::from_millis(1));
            }
            let throttled = pool.invoke("{}").expect("an answer");
            shared.released.store(true, Ordering::SeqCst);
            assert_eq!(throttled.status, 429);
            let body = throttled.json().expect("JSON");
            assert_eq!(
                body["Reason"],
                "ReservedFunctionConcurrentInvocationLimitExceeded"
            );
            assert_eq!(body["message"], "Rate Exceeded.");
            assert_eq!(busy.join().expect("thread").expect("answer").status, 200);
        });
        // Once free, the environment serves again: no second one was started.
        assert_eq!(pool.invoke("{}").expect("answer").status, 200);
        assert_eq!(pool.started(), 1);
    }

    #[test]
    fn an_environment_that_fails_to_start_frees_its_place() {
        let pool: Pool<Fake> = Pool::new(
            Size {
                environments: 1,
                overflow: Overflow::Wait,
            },
            Box::new(|_| Err("no emulator".to_owned())),
        );
        for _ in 0..3 {
            assert_eq!(pool.invoke("{}").expect_err("fails"), "no emulator");
        }
        assert_eq!(pool.started(), 0);
    }

    /// An environment whose first invocation gets no answer.
    struct Broken {
        calls: Arc<AtomicUsize>,
        stopped: Arc<AtomicUsize>,
    }

    impl Environment for Broken {
        fn invoke(&self, _: &[u8]) -> Result<Invocation, String> {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err("no answer".into());
            }
            Ok(Invocation {
                status: 200,
                body: "{}".into(),
            })
        }
    }

    impl Drop for Broken {
        fn drop(&mut self) {
            self.stopped.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_environment_that_did_not_answer_is_retired_not_reused() {
        let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (count, gone) = (Arc::clone(&started), Arc::clone(&stopped));
        // Shared: only the very first invocation goes unanswered.
        let calls = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(
            Size {
                environments: 1,
                overflow: Overflow::Throttle,
            },
            Box::new(move |_| {
                count.fetch_add(1, Ordering::SeqCst);
                Ok(Broken {
                    calls: Arc::clone(&calls),
                    stopped: Arc::clone(&gone),
                })
            }),
        );
        assert_eq!(pool.invoke("{}").expect_err("no answer"), "no answer");
        assert_eq!(
            stopped.load(Ordering::SeqCst),
            1,
            "the broken one is stopped"
        );
        assert_eq!((pool.started(), pool.busy()), (0, 0));
        // A fresh environment serves the next invocation, not a throttle.
        assert_eq!(pool.invoke("{}").expect("an answer").status, 200);
        assert_eq!(stopped.load(Ordering::SeqCst), 1);
        assert_eq!(started.load(Ordering::SeqCst), 2);
        assert_eq!(pool.started(), 1);
    }

    /// An environment whose process ends with its first answer.
    struct Ending(usize);

    impl Environment for Ending {
        fn invoke(&self, _: &[u8]) -> Result<Invocation, String> {
            Ok(Invocation {
                status: 200,
                body: format!("{{\"environment\":{}}}", self.0),
            })
        }

        fn ended(&self) -> bool {
            true
        }
    }

    #[test]
    fn an_environment_that_ended_with_its_answer_is_replaced() {
        let starts = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&starts);
        let pool = Pool::new(
            Size {
                environments: 1,
                overflow: Overflow::Wait,
            },
            Box::new(move |n| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(Ending(n))
            }),
        )
        .with_slots(2);
        for round in 1..=3 {
            let answer = pool.invoke("{}").expect("answered");
            assert_eq!(
                answer.body, r#"{"environment":0}"#,
                "its place is free again"
            );
            assert_eq!(pool.started(), 0, "retired at once");
            assert_eq!(
                starts.load(Ordering::SeqCst),
                round,
                "a fresh one each time"
            );
        }
    }

    #[test]
    fn sizes_come_from_reserved_concurrency_or_the_setting() {
        let mut function = Function {
            logical_id: "F".into(),
            binary: "f".into(),
            memory_mb: 128,
            timeout_s: 3,
            env: Vec::new(),
            reserved_concurrency: None,
        };
        assert_eq!(
            Size::of(&function, 3),
            Size {
                environments: 3,
                overflow: Overflow::Wait
            }
        );
        function.reserved_concurrency = Some(1);
        assert_eq!(
            Size::of(&function, 3),
            Size {
                environments: 1,
                overflow: Overflow::Throttle
            }
        );
        assert_eq!(parse_size("4"), Ok(4));
        for bad in ["0", "65", "-1", "two", ""] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(
            numbered(Path::new("/l/order-processor.log"), 2),
            Path::new("/l/order-processor.2.log")
        );
    }
}
