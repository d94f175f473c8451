//! What a `Pool` handle shares: the engine's registry and the table of the pool's own closure
//! lanes. Its drop, when the last handle goes, is the pool's graceful shutdown.

use std::sync::Arc;

use crossbeam_utils::sync::Parker;

use super::closures::Closures;
use super::table::LaneTable;
use crate::engine::{Config, Registry};
use crate::error::BuildError;

pub(crate) struct PoolHandle {
    pub(crate) registry: Arc<Registry>,
    pub(crate) lanes: Arc<LaneTable<Closures>>,
}

impl PoolHandle {
    /// A pool running with `config`: its registry, its closure lanes, its threads started.
    pub(crate) fn start(config: Config) -> Result<Arc<PoolHandle>, BuildError> {
        let monitor = Parker::new();
        let registry = Arc::new(Registry::new(config, monitor.unparker().clone()));
        let lanes = LaneTable::new(Closures::of(&registry), &registry.config);
        registry.register_table(Arc::downgrade(&lanes) as _);
        // Made before the threads start: if one cannot start, dropping it shuts down those that
        // did.
        let handle = Arc::new(PoolHandle {
            registry: registry.clone(),
            lanes,
        });
        registry.start(monitor)?;
        Ok(handle)
    }
}

impl Drop for PoolHandle {
    /// The last handle is gone: a graceful shutdown that waits for the accepted tasks, unless
    /// on one of the pool's own threads (see "Dropping the last handle" on `Pool`).
    fn drop(&mut self) {
        let _ = self.registry.close_and_wait(None);
    }
}
