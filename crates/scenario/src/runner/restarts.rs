//! The runner's scheduled restarts: the engine dropped and rebuilt, the store closed
//! and reopened, or the store restored from an image taken a while before (behind the
//! cloud), after which the fleet's specs are applied again.

use super::*;

impl<P: Provider + 'static> Driver<'_, P> {
    pub(super) fn fire_restarts(&mut self, now: Timestamp) -> Result<(), RunError> {
        while self.restarts.first().is_some_and(|r| r.0 <= now) {
            let (_, restart) = self.restarts.remove(0);
            let what = match restart {
                Restart::Engine => {
                    self.restart_engine(false)?;
                    "the engine was dropped and rebuilt on the same store".to_string()
                }
                Restart::Store => {
                    self.restart_engine(true)?;
                    self.count_fired(STORE_RESTART);
                    "the engine and its store were closed and reopened".to_string()
                }
                Restart::Image(_) => {
                    if let StoreHome::Disk(disk) = &self.home {
                        let image = disk.image().map_err(|e| StoreError::Backend {
                            path: "<memory disk>".into(),
                            message: format!("taking an image for a lagging restore: {e}"),
                        })?;
                        self.images.push((now, image));
                    }
                    continue;
                }
                Restart::Lagging(image_at) => {
                    let Some(i) = self.images.iter().position(|(t, _)| *t == image_at) else {
                        continue;
                    };
                    let (_, image) = self.images.remove(i);
                    self.home = StoreHome::Disk(image);
                    self.restart_engine(true)?;
                    self.count_fired(STORE_RESTORED_LAGGING);
                    for t in self.tracks.values_mut() {
                        t.restores += 1;
                    }
                    self.reassert_specs();
                    format!(
                        "the engine and its store were closed; the store came back as it was {} before",
                        now.since(image_at)
                    )
                }
            };
            self.emit(now, "sim", Severity::Warning, "EngineRestarted", what);
        }
        Ok(())
    }

    /// After a restore that lost commits, the operator applies the fleet's specs again
    /// (as GitOps would) and deletes again what was being deleted: the store lost what
    /// flightdeck did and learned, not what the user wants. A cluster whose deletion
    /// finished after the backup was taken comes back with records of objects that are
    /// gone; flightdeck cannot tell that from a cloud it was never on
    /// (`DeletionUnconfirmed`), the operator who restored the backup can: they delete it
    /// with `--forget`, which still deletes whatever the cloud shows of it.
    fn reassert_specs(&mut self) {
        for (name, spec) in &self.specs {
            let deleting = self.tracks.get(name).is_some_and(|t| t.deletion_requested);
            let result = if deleting {
                match self.engine.cluster(name) {
                    Some(_) => self
                        .engine
                        .delete(name)
                        .and_then(|()| self.engine.forget(name)),
                    None => Ok(()),
                }
            } else {
                self.engine.apply(spec.clone())
            };
            if let Err(e) = result {
                self.workload_failures
                    .push(format!("re-applying {name} after a lagging restore: {e}"));
            }
        }
    }

    fn count_fired(&self, name: &'static str) {
        *self
            .fired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name)
            .or_default() += 1;
    }

    /// Drops the engine (losing everything it held in memory) and builds a new one from
    /// the store; with `with_store` the store itself is closed and reopened first. The
    /// provider outlives the engine here, as it would not in a real restart: what it
    /// keeps between reads (the node watches) is dropped with the engine.
    pub(super) fn restart_engine(&mut self, with_store: bool) -> Result<(), RunError> {
        self.engine_generation += 1;
        self.provider.forget_node_watches();
        // A stand-in on a scratch store lets the old engine, the only holder of the real
        // store, be dropped before the store is reopened. It never runs.
        let scratch = Arc::new(Store::in_memory()?);
        let stand_in = self.build(&scratch, u64::MAX)?;
        let store = std::mem::replace(&mut self.engine, stand_in).into_store();
        let store = if with_store {
            drop(store);
            Arc::new(self.home.open()?)
        } else {
            store
        };
        self.engine = self.build(&store, self.engine_generation)?;
        Ok(())
    }
}
