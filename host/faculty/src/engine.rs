//! Engine policy, in one place: how faculty code is compiled, how much an instance may
//! use, and how deadlines tick and stop a guest. Every number is a named constant with its
//! reason.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap, UpdateDeadline};

/// How often the epoch advances while a guest runs. A running guest is checked against its
/// deadline (and for shutdown) at every tick, so this is the granularity of `timeoutMs`;
/// 20 ms costs 50 wake-ups a second while calls run, and a runaway call is stopped within a
/// fraction of a second. While no guest runs the tickers sleep: an idle host is not woken.
pub const EPOCH_TICK: Duration = Duration::from_millis(20);

/// Largest `faculties.<id>.memoryMb` the schema allows; the pool's memory slots are sized
/// for it.
pub const MAX_MEMORY_MB: u64 = 1024;

/// Instances the pool holds at once. Calls are one instance each (plus one per nested
/// `call`), and run on blocking threads; 256 is far above the concurrency two cores can
/// use, and beyond it instantiation waits for nothing — it fails cleanly as `busy`.
const POOL_COMPONENT_INSTANCES: u32 = 256;
/// Core instances across the pool: components built by componentize-py/-js carry a few
/// dozen core instances each.
const POOL_CORE_INSTANCES: u32 = 4096;
/// Linear memories across the pool.
const POOL_MEMORIES: u32 = 1024;
/// Tables across the pool.
const POOL_TABLES: u32 = 2048;
/// Per component: generous enough for language runtimes compiled to components.
const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 128;
const MAX_MEMORIES_PER_COMPONENT: u32 = 16;
const MAX_TABLES_PER_COMPONENT: u32 = 64;
/// Python's and JavaScript's interpreters have tables of tens of thousands of functions.
const TABLE_ELEMENTS: usize = 200_000;
/// Per-instance metadata sizes (not linear memory).
const MAX_COMPONENT_INSTANCE_SIZE: usize = 4 << 20;
const MAX_CORE_INSTANCE_SIZE: usize = 4 << 20;
/// Bytes of a reused memory (and table) slot that stay mapped between calls instead of
/// being released and faulted in again. A faculty call touches a few hundred KiB; keeping
/// the first MiB resident makes a fresh instance ~40% cheaper, at the price of that much
/// resident memory per warm slot.
const KEEP_RESIDENT: usize = 1 << 20;
/// Native stack a guest may use before it traps.
const MAX_WASM_STACK: usize = 1 << 20;

/// The engines and how they allocate instances.
pub struct FacultyEngine {
    /// The engine faculty code runs in for good: Cranelift, optimizing.
    pub engine: Engine,
    /// The quick engine (Winch, the baseline compiler: several times faster to compile,
    /// slower code) a component just found runs in until its optimized code is ready, so a
    /// new instance is callable in a fraction of a second. `None` where Winch is not
    /// available.
    pub quick: Option<Engine>,
    /// Whether the pooling allocator is in use (it is unless the probe failed).
    pub pooling: bool,
}

impl FacultyEngine {
    /// Builds the engine: component model, epoch interruption, and the pooling allocator
    /// when this machine can reserve its address space (otherwise on-demand allocation,
    /// which is slower per call but always works). Starts the epoch ticker.
    ///
    /// # Errors
    /// When neither configuration can be built.
    pub fn new() -> wasmtime::Result<Self> {
        let (engine, pooling) = match Engine::new(&config(true)) {
            Ok(engine) => (engine, true),
            Err(error) => {
                tracing::warn!(
                    "faculty runtime: pooling allocator unavailable ({error:#}); using on-demand allocation"
                );
                (Engine::new(&config(false))?, false)
            }
        };
        start_ticker(&engine);
        let quick = match Engine::new(&quick_config()) {
            Ok(quick) => {
                start_ticker(&quick);
                Some(quick)
            }
            Err(error) => {
                tracing::debug!("faculty runtime: no quick compiler ({error:#}); components wait for optimized code");
                None
            }
        };
        Ok(Self { engine, quick, pooling })
    }
}

/// The quick engine's configuration: the same semantics and limits, compiled by Winch, with
/// on-demand allocation (it serves only the first seconds of a component's life).
fn quick_config() -> Config {
    let mut config = config(false);
    config.strategy(wasmtime::Strategy::Winch);
    config
}

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.max_wasm_stack(MAX_WASM_STACK);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    if pooling {
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_COMPONENT_INSTANCES)
            .total_core_instances(POOL_CORE_INSTANCES)
            .total_memories(POOL_MEMORIES)
            .total_tables(POOL_TABLES)
            .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
            .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
            .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
            .table_elements(TABLE_ELEMENTS)
            .max_component_instance_size(MAX_COMPONENT_INSTANCE_SIZE)
            .max_core_instance_size(MAX_CORE_INSTANCE_SIZE)
            .max_memory_size(usize::try_from(MAX_MEMORY_MB << 20).unwrap_or(usize::MAX))
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT)
            // Reset only the pages a call dirtied, where the kernel can say which (Linux 6.7+).
            .pagemap_scan(wasmtime::Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// The guests armed (running or about to) across the process's engines, and the tickers
/// waiting for one.
struct Ticking {
    armed: usize,
    waiting: usize,
}

static TICKING: Mutex<Ticking> = Mutex::new(Ticking { armed: 0, waiting: 0 });
/// Signalled when the first guest is armed while a ticker waits.
static GUEST_ARMED: Condvar = Condvar::new();

fn ticking() -> std::sync::MutexGuard<'static, Ticking> {
    TICKING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A guest's share in keeping the tickers running: taken by [`arm`], given back when
/// dropped (the call ended, however it ended).
#[must_use = "the tickers stop once no guest is armed: keep this while the guest runs"]
pub(super) struct Armed(());

impl Armed {
    fn take() -> Self {
        let mut ticking = ticking();
        ticking.armed += 1;
        // Only a waiting ticker needs the signal, which costs a system call.
        if ticking.armed == 1 && ticking.waiting > 0 {
            GUEST_ARMED.notify_all();
        }
        Self(())
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let mut ticking = ticking();
        ticking.armed = ticking.armed.saturating_sub(1);
    }
}

/// A thread that advances the engine's epoch every [`EPOCH_TICK`] while a guest is armed,
/// for the life of the process (the host builds one engine and one quick engine).
fn start_ticker(engine: &Engine) {
    let engine = engine.clone();
    let spawned = std::thread::Builder::new().name("faculty-epoch".into()).spawn(move || {
        loop {
            {
                // Waiting for work, not for an answer: nothing waits on this thread.
                let mut state = ticking();
                while state.armed == 0 {
                    state.waiting += 1;
                    state = GUEST_ARMED.wait(state).unwrap_or_else(PoisonError::into_inner);
                    state.waiting -= 1;
                }
            }
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
        }
    });
    if let Err(e) = spawned {
        tracing::error!("faculty runtime: cannot start the epoch ticker, deadlines will not fire: {e}");
    }
}

/// The guest was interrupted because its caller stopped waiting (see
/// [`crate::CallContext::cancelled_by`]).
#[derive(Debug, thiserror::Error)]
#[error("stopped: its caller went away")]
pub(super) struct Cancelled;

/// The guest was interrupted because the runtime is shutting down.
#[derive(Debug, thiserror::Error)]
#[error("abandoned at shutdown")]
pub(super) struct Abandoned;

/// Arms `store` to stop at `deadline`, or as soon as `stop` (the runtime's) or `cancel`
/// (the call's) is set: the epoch ticks every [`EPOCH_TICK`] as long as the returned
/// [`Armed`] is kept, and at each tick the guest is checked.
pub(super) fn arm<T>(
    store: &mut Store<T>,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    cancel: Option<Arc<AtomicBool>>,
    ticks: Ticks,
) -> Armed {
    let armed = Armed::take();
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if stop.load(Ordering::Acquire) {
            return Err(wasmtime::Error::new(Abandoned));
        }
        if cancel.as_ref().is_some_and(|cancel| cancel.load(Ordering::Acquire)) {
            return Err(wasmtime::Error::new(Cancelled));
        }
        if Instant::now() >= deadline {
            return Err(Trap::Interrupt.into());
        }
        Ok(match ticks {
            Ticks::Continue => UpdateDeadline::Continue(1),
            Ticks::Yield => UpdateDeadline::Yield(1),
        })
    });
    armed
}

/// What a guest that is still within its deadline does at an epoch tick.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ticks {
    /// Runs on: it has a blocking thread to itself.
    Continue,
    /// Yields to the async runtime, which polls it again after the tasks waiting on the
    /// same thread: a long call on an async task does not hold its thread.
    Yield,
}

/// What trapped, in one line: the trap kind when there is one, else the error's first
/// line (wasm backtraces are left out).
#[must_use]
pub fn trap_summary(error: &wasmtime::Error) -> String {
    if let Some(trap) = error.downcast_ref::<Trap>() {
        return trap.to_string();
    }
    let full = format!("{error:#}");
    full.lines().next().unwrap_or("trapped").to_owned()
}
