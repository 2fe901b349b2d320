//! The one-shot verbs: apply, get, describe, plan, resume and the simulator's faults.

use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;

use super::connect::ConnectArgs;
use super::http::{Api, connect};
use super::render::{clock, cluster_table, plan_text, print_doc};
use super::types::{
    ApplyResult, ClusterDetail, ClusterList, ClusterSummary, EventView, FaultKinds, FaultRequest,
    FaultView, PlanView,
};
use super::{DescribeArgs, DocFormat, FaultArgs, FaultsArgs, Format, GetArgs};
use crate::Output;

/// The largest spec file `apply` sends.
const SPEC_MAX: u64 = 16 << 20;

fn read_spec(file: &Path) -> anyhow::Result<(String, String)> {
    let mut text = String::new();
    let source = if file == Path::new("-") {
        std::io::stdin()
            .take(SPEC_MAX + 1)
            .read_to_string(&mut text)
            .context("cannot read the spec from stdin")?;
        "stdin".to_string()
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(SPEC_MAX + 1).read_to_string(&mut text))
            .with_context(|| format!("cannot read {}", file.display()))?;
        file.display().to_string()
    };
    if text.len() as u64 > SPEC_MAX {
        bail!(
            "{source} is larger than {} MiB; a spec is not",
            SPEC_MAX >> 20
        );
    }
    Ok((text, source))
}

/// The file's clusters with every userData file read, as one JSON document each
/// (JSON is YAML: the daemon parses the stream as it parses a file).
fn resolved_documents(file: &std::path::Path) -> anyhow::Result<String> {
    let docs = flightdeck_spec::load_file(file)?;
    let mut out = String::new();
    for d in docs {
        let flightdeck_spec::Document::Cluster(c) = d else {
            anyhow::bail!("{}: only Cluster documents can be applied", file.display());
        };
        out.push_str("---\n");
        out.push_str(&serde_json::to_string(&c)?);
        out.push('\n');
    }
    Ok(out)
}

pub async fn apply(args: super::ApplyArgs) -> anyhow::Result<ExitCode> {
    let (mut text, source) = read_spec(&args.file)?;
    let mut json = args
        .file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    // userData and workload kubeconfig files are named relative to the spec, which only
    // this side knows: the clusters travel with the content of the one and the absolute
    // path of the other (as JSON documents).
    if (text.contains("userData") || text.contains("workload")) && source != "stdin" {
        text = resolved_documents(&args.file)?;
        json = true;
    }
    let content_type = if json {
        "application/json"
    } else {
        "application/yaml"
    };
    let api = connect(&args.connect)?;
    let mut url = api.endpoint(&["clusters"]);
    url.query_pairs_mut().append_pair("source", &source);
    if args.adopt {
        url.query_pairs_mut().append_pair("adopt", "true");
    }
    let rb = api
        .request(Method::POST, url)
        .header(CONTENT_TYPE, content_type)
        .body(text);
    let v = api.send_json(rb).await?;
    if let Some(f) = args.output {
        print_doc(&v, f.into())?;
        return Ok(ExitCode::SUCCESS);
    }
    let result: ApplyResult = api.typed(v, "apply result")?;
    for a in &result.items {
        outln!("cluster/{} {} ({})", a.name, a.result, a.cloud);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn get(args: GetArgs) -> anyhow::Result<ExitCode> {
    let api = connect(&args.connect)?;
    if args.resource == super::Resource::Kubeconfig {
        return kubeconfig(&api, &args).await;
    }
    if args.watch {
        return super::follow::watch(&api, args.name.as_deref(), args.output).await;
    }
    let wide = args.output == Some(Format::Wide);
    let doc = args.output.filter(|f| *f != Format::Wide);
    let (v, summaries) = match &args.name {
        Some(name) => {
            let v = api.get_json(&["clusters", name]).await?;
            let d: ClusterDetail = api.typed(v.clone(), "cluster")?;
            (v, vec![d.summary])
        }
        None => {
            let v = api.get_json(&["clusters"]).await?;
            let list: ClusterList = api.typed(v.clone(), "cluster list")?;
            (v, list.items)
        }
    };
    if let Some(f) = doc {
        print_doc(&v, f)?;
    } else if summaries.is_empty() {
        eprintln!("No clusters found.");
    } else {
        out!("{}", cluster_table(&summaries, wide));
    }
    Ok(ExitCode::SUCCESS)
}

/// `get kubeconfig NAME`: the daemon issues it (an event says so); it goes to stdout
/// only, never to a file or a log of this client's.
async fn kubeconfig(api: &Api, args: &GetArgs) -> anyhow::Result<ExitCode> {
    let Some(name) = &args.name else {
        bail!("get kubeconfig: name the cluster (flightdeck get kubeconfig NAME)");
    };
    if args.watch || args.output.is_some() {
        bail!("get kubeconfig: --watch and -o do not apply; the kubeconfig is YAML");
    }
    let mut url = api.endpoint(&["clusters", name, "kubeconfig"]);
    url.query_pairs_mut()
        .append_pair("ttl", &args.ttl.to_string());
    let response = api.send(api.request(Method::POST, url)).await?;
    let text = response.text().await.map_err(|e| api.transport_error(&e))?;
    out!("{}", text.trim_end());
    Ok(ExitCode::SUCCESS)
}

pub async fn describe(args: DescribeArgs) -> anyhow::Result<ExitCode> {
    if args.resource == super::Resource::Kubeconfig {
        bail!(
            "describe kubeconfig: there is nothing to describe; `flightdeck get kubeconfig NAME` prints one"
        );
    }
    let api = connect(&args.connect)?;
    let names = match &args.name {
        Some(n) => vec![n.clone()],
        None => {
            let v = api.get_json(&["clusters"]).await?;
            let list: ClusterList = api.typed(v, "cluster list")?;
            list.items.into_iter().map(|c| c.name).collect()
        }
    };
    if names.is_empty() {
        eprintln!("No clusters found.");
    }
    for (i, name) in names.iter().enumerate() {
        let v = api.get_json(&["clusters", name]).await?;
        let d: ClusterDetail = api.typed(v, "cluster")?;
        if i > 0 {
            outln!();
        }
        out!("{}", super::describe::describe(&d)?);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn plan(
    name: &str,
    output: Output,
    connect_args: &ConnectArgs,
) -> anyhow::Result<ExitCode> {
    let api = connect(connect_args)?;
    let v = api.get_json(&["clusters", name, "plan"]).await?;
    match output {
        Output::Json => print_doc(&v, Format::Json)?,
        Output::Text => {
            let p: PlanView = api.typed(v, "plan")?;
            out!("{}", plan_text(&p));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn resume(args: &crate::ResumeArgs) -> anyhow::Result<ExitCode> {
    let connect_args = ConnectArgs {
        server: args.server.clone(),
        state_dir: args.state_dir.clone(),
    };
    let api = connect(&connect_args)?;
    let url = api.endpoint(&["clusters", &args.cluster, "resume"]);
    let v = match api.send_json(api.request(Method::POST, url)).await {
        Ok(v) => v,
        Err(e) => match &args.state_dir {
            Some(dir) if !e.is::<super::http::ApiFailure>() => bail!(
                "{e:#}\nif no daemon serves {} any more, remove {} to resume offline in it",
                dir.display(),
                dir.join(super::connect::URL_FILE).display()
            ),
            _ => return Err(e),
        },
    };
    outln!("{}", resumed_text(&api, &args.cluster, v)?);
    Ok(ExitCode::SUCCESS)
}

/// The `Resumed` event (API.md), or the cluster's summary, which some daemons answer.
fn resumed_text(api: &Api, name: &str, v: serde_json::Value) -> anyhow::Result<String> {
    if let Ok(e) = serde_json::from_value::<EventView>(v.clone()) {
        return Ok(format!("{}: {}", e.cluster, e.message));
    }
    let s: ClusterSummary = api.typed(v, "Resumed event")?;
    Ok(match s.breakers.as_slice() {
        [] => format!("{name}: resumed; no breaker is tripped"),
        still => format!("{name}: resumed; still tripped: {}", still.join(", ")),
    })
}

fn fault_request(args: &FaultArgs) -> anyhow::Result<FaultRequest> {
    let (Some(kind), Some(cluster)) = (&args.kind, &args.cluster) else {
        bail!("a fault to start needs its KIND and --cluster (or --stop ID to stop one)");
    };
    if let Some(r) = args.rate
        && !(r.is_finite() && r > 0.0 && r <= 1.0)
    {
        bail!("--rate is a fraction of calls or objects, more than 0 and at most 1, got {r}");
    }
    Ok(FaultRequest {
        kind: kind.clone(),
        cluster: cluster.clone(),
        duration: args.duration.map(|d| d.to_string()),
        service: args.service.clone(),
        rate: args.rate,
        latency: args.latency.map(|d| d.to_string()),
        count: args.count,
        level: args.level.clone(),
        template: args.template.clone(),
        node: args.node.clone(),
    })
}

pub async fn fault(args: FaultArgs) -> anyhow::Result<ExitCode> {
    if let Some(id) = args.stop {
        return stop_fault(id, args.output, &args.connect).await;
    }
    let request = fault_request(&args)?;
    let api = connect(&args.connect)?;
    let rb = api
        .request(Method::POST, api.endpoint(&["sim", "faults"]))
        .json(&request);
    let v = api.send_json(rb).await?;
    if let Some(f) = args.output {
        print_doc(&v, f.into())?;
        return Ok(ExitCode::SUCCESS);
    }
    let f: FaultView = api.typed(v, "fault")?;
    outln!(
        "fault {} {} started for cluster/{} ({}), {}",
        f.id,
        f.kind,
        f.cluster,
        f.cloud,
        until(&f)
    );
    Ok(ExitCode::SUCCESS)
}

/// `sim fault --stop ID`: `DELETE /api/v1/sim/faults/{id}`.
async fn stop_fault(
    id: u64,
    output: Option<DocFormat>,
    connect_args: &ConnectArgs,
) -> anyhow::Result<ExitCode> {
    let api = connect(connect_args)?;
    let url = api.endpoint(&["sim", "faults", &id.to_string()]);
    let response = api.send(api.request(Method::DELETE, url)).await?;
    if let Some(f) = output {
        let text = response.text().await.map_err(|e| api.transport_error(&e))?;
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            print_doc(&v, f.into())?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    outln!("fault {id} stopped");
    Ok(ExitCode::SUCCESS)
}

fn until(f: &FaultView) -> String {
    match f.end {
        Some(end) => format!("until {}", clock(end)),
        None => "until the daemon stops".into(),
    }
}

pub async fn faults(args: FaultsArgs) -> anyhow::Result<ExitCode> {
    let api = connect(&args.connect)?;
    let v = api.get_json(&["sim", "faults"]).await?;
    if let Some(f) = args.output {
        print_doc(&v, f.into())?;
        return Ok(ExitCode::SUCCESS);
    }
    let k: FaultKinds = api.typed(v, "fault list")?;
    out!("{}", faults_text(&k));
    Ok(ExitCode::SUCCESS)
}

pub fn faults_text(k: &FaultKinds) -> String {
    let mut out = String::from("Fault kinds:\n");
    for kind in &k.kinds {
        out.push_str(&format!("  {kind}\n"));
    }
    out.push('\n');
    if k.active.is_empty() {
        out.push_str("No fault is active.\n");
        return out;
    }
    out.push_str("Active faults (times UTC):\n");
    let rows: Vec<Vec<String>> = k
        .active
        .iter()
        .map(|f| {
            vec![
                f.id.to_string(),
                f.kind.clone(),
                f.cluster.clone(),
                f.cloud.clone(),
                clock(f.start),
                f.end.map_or("-".into(), clock),
            ]
        })
        .collect();
    let table = super::render::Table::render(
        &["ID", "KIND", "CLUSTER", "CLOUD", "STARTED", "ENDS"],
        &rows,
    );
    for line in table.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}
