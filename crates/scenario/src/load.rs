//! Finding a scenario by built-in name or path, and resolving the clusters it names.

use std::path::{Path, PathBuf};

use flightdeck_spec::{Cluster, Document, Scenario, SpecError, load_documents};

use crate::builtin;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(
        "no scenario {0:?}: not a built-in name (see `flightdeck sim scenarios`) and not a readable file"
    )]
    NotFound(String),
    #[error("{0}: expected one `kind: Scenario` document")]
    NotAScenario(String),
    #[error("{origin}: cluster file {file}: expected `kind: Cluster` documents only")]
    NotAClusterFile { origin: String, file: String },
    #[error("{origin}: cluster {name} is given twice")]
    DuplicateCluster { origin: String, name: String },
    #[error(
        "{origin}: workload step {index} names cluster {name}, which neither the scenario nor an earlier step defines"
    )]
    UnknownCluster {
        origin: String,
        index: usize,
        name: String,
    },
    #[error("{origin}: workload step {index} applies {file}: {why}")]
    BadApply {
        origin: String,
        index: usize,
        file: String,
        why: String,
    },
}

/// A scenario with its cluster files read.
#[derive(Clone, Debug)]
pub struct LoadedScenario {
    pub source: String,
    pub scenario: Scenario,
    pub clusters: Vec<Cluster>,
    /// Cluster specs for `apply` workload steps, by step index.
    pub applies: Vec<(usize, Cluster)>,
}

impl LoadedScenario {
    /// The routers the scenario's OpenStack clusters name, once each: the operator's
    /// (flightdeck manages only its routes on them), so a simulator serving the scenario
    /// holds them as foreign objects.
    pub fn operator_routers(&self) -> std::collections::BTreeSet<String> {
        self.clusters
            .iter()
            .filter_map(|c| c.spec.provider.openstack.as_ref()?.router.as_ref())
            .map(|r| r.to_string())
            .collect()
    }
}

impl LoadedScenario {
    /// A run of `clusters` alone, with no faults, workload or restarts: what `up` and
    /// the benchmark drive, for at most `duration` of virtual time.
    pub fn of_clusters(
        source: String,
        clusters: Vec<Cluster>,
        seed: u64,
        duration: flightdeck_spec::Duration,
    ) -> Self {
        use flightdeck_spec::cluster::ApiVersion;
        use flightdeck_spec::scenario::{Expectations, ScenarioMetadata, ScenarioSpec};
        let name = flightdeck_spec::Text::new("up").expect("`up` is a valid name");
        LoadedScenario {
            source,
            scenario: Scenario {
                api_version: ApiVersion,
                kind: "Scenario".into(),
                metadata: ScenarioMetadata { name },
                spec: ScenarioSpec {
                    description: "flightdeck up".into(),
                    seed,
                    duration,
                    clusters: Vec::new(),
                    faults: Vec::new(),
                    workload: Vec::new(),
                    restarts: Vec::new(),
                    expect: Expectations {
                        invariants: None,
                        ..Expectations::default()
                    },
                },
            },
            clusters,
            applies: Vec::new(),
        }
    }
}

enum Origin {
    Builtin(String),
    Disk(PathBuf),
}

impl Origin {
    fn read(&self, rel: &Path) -> Result<(String, String), ScenarioError> {
        match self {
            Origin::Builtin(base) => {
                let path = builtin::join(base, &rel.to_string_lossy());
                let text =
                    builtin::file(&path).ok_or_else(|| ScenarioError::NotFound(path.clone()))?;
                Ok((path, text.to_string()))
            }
            Origin::Disk(base) => {
                let path = base.parent().unwrap_or(Path::new(".")).join(rel);
                let text = std::fs::read_to_string(&path)
                    .map_err(|_| ScenarioError::NotFound(path.display().to_string()))?;
                Ok((path.display().to_string(), text))
            }
        }
    }
}

/// Loads a built-in scenario by name (`seed-001-member-stuck-pending`) or a scenario
/// file by path. A path that exists wins over a built-in name.
pub fn load_scenario(name_or_path: &str) -> Result<LoadedScenario, ScenarioError> {
    let disk = Path::new(name_or_path);
    let (origin, source, text) = if disk.is_file() {
        let text = std::fs::read_to_string(disk)
            .map_err(|_| ScenarioError::NotFound(name_or_path.to_string()))?;
        (
            Origin::Disk(disk.to_path_buf()),
            name_or_path.to_string(),
            text,
        )
    } else {
        let path = format!("scenarios/{name_or_path}.yaml");
        let text = builtin::file(&path)
            .ok_or_else(|| ScenarioError::NotFound(name_or_path.to_string()))?;
        (Origin::Builtin(path.clone()), path, text.to_string())
    };
    let docs = load_documents(&text, &source)?;
    let scenario = match docs.as_slice() {
        [Document::Scenario(s)] => (**s).clone(),
        _ => return Err(ScenarioError::NotAScenario(source)),
    };
    let read_clusters = |rel: &Path| -> Result<Vec<Cluster>, ScenarioError> {
        let (path, text) = origin.read(rel)?;
        load_documents(&text, &path)?
            .into_iter()
            .map(|d| match d {
                Document::Cluster(c) => Ok(*c),
                Document::Scenario(_) => Err(ScenarioError::NotAClusterFile {
                    origin: source.clone(),
                    file: path.clone(),
                }),
            })
            .collect()
    };
    let mut clusters: Vec<Cluster> = Vec::new();
    for c in &scenario.spec.clusters {
        let found = match (&c.file, &c.inline) {
            (Some(file), _) => read_clusters(file)?,
            (None, Some(inline)) => vec![(**inline).clone()],
            (None, None) => Vec::new(),
        };
        for cluster in found {
            if clusters.iter().any(|x| x.name() == cluster.name()) {
                return Err(ScenarioError::DuplicateCluster {
                    origin: source.clone(),
                    name: cluster.name().to_string(),
                });
            }
            clusters.push(cluster);
        }
    }
    let mut applies = Vec::new();
    // Steps run in time order (ties in file order): a step may name a cluster the
    // scenario defines or one an earlier step applied.
    let mut order: Vec<(usize, &flightdeck_spec::scenario::WorkloadStep)> =
        scenario.spec.workload.iter().enumerate().collect();
    order.sort_by_key(|(i, s)| (s.at, *i));
    let mut applied: Vec<String> = Vec::new();
    for (i, step) in order {
        if let Some(file) = &step.file {
            let found = read_clusters(file)?;
            let file_name = file.display().to_string();
            let [cluster] = found.as_slice() else {
                return Err(ScenarioError::BadApply {
                    origin: source.clone(),
                    index: i,
                    file: file_name,
                    why: "the file must hold exactly one cluster".into(),
                });
            };
            if cluster.name() != &step.cluster {
                return Err(ScenarioError::BadApply {
                    origin: source.clone(),
                    index: i,
                    file: file_name,
                    why: format!(
                        "it defines cluster {}, not {}",
                        cluster.name(),
                        step.cluster
                    ),
                });
            }
            applies.push((i, cluster.clone()));
            applied.push(step.cluster.to_string());
        } else if !clusters.iter().any(|c| c.name() == &step.cluster)
            && !applied.contains(&step.cluster.to_string())
        {
            return Err(ScenarioError::UnknownCluster {
                origin: source.clone(),
                index: i,
                name: step.cluster.to_string(),
            });
        }
    }
    Ok(LoadedScenario {
        source,
        scenario,
        clusters,
        applies,
    })
}

impl LoadedScenario {
    /// Whether every cluster of the scenario lives on the cloud `is_on` recognises;
    /// `false` when none does. A scenario mixes no clouds (one engine drives one
    /// provider): some but not all is an error naming `cloud`.
    pub fn all_on(
        &self,
        cloud: &str,
        is_on: impl Fn(&flightdeck_spec::Provider) -> bool,
    ) -> Result<bool, crate::RunError> {
        let n = self
            .clusters
            .iter()
            .filter(|c| is_on(&c.spec.provider))
            .count();
        match n {
            0 => Ok(false),
            n if n == self.clusters.len() => Ok(true),
            _ => Err(crate::RunError::Wire(format!(
                "the scenario mixes {cloud} clusters with others; one run drives one cloud"
            ))),
        }
    }
}
