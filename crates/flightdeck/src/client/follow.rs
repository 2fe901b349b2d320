//! The verbs that keep looking: `get -w`, `delete cluster NAME --wait` and `events`
//! (with `--follow`, the daemon's server-sent events).

use std::collections::BTreeMap;
use std::pin::pin;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use reqwest::Method;
use reqwest::header::ACCEPT;

use super::connect::ConnectArgs;
use super::http::{Api, ApiFailure, connect};
use super::render::{
    AGE_COLUMN, Table, cluster_header, cluster_row, event_line, human_duration, print_doc,
};
use super::sse::{Message, Parser};
use super::types::{ClusterDetail, ClusterSummary, EventList, EventView};
use super::{DocFormat, EventsArgs, Format};

/// How often `get -w` and `delete --wait` look again.
pub const POLL: Duration = Duration::from_secs(2);

/// An error not worth retrying: the daemon understood and said no (4xx).
fn fatal(e: &anyhow::Error) -> bool {
    e.downcast_ref::<ApiFailure>()
        .is_some_and(|f| f.status.is_client_error())
}

/// Prints a passing error once, until it changes or the calls work again.
#[derive(Default)]
struct Hiccups(Option<String>);

impl Hiccups {
    fn report(&mut self, e: &anyhow::Error, doing: &str) {
        let msg = format!("{e:#}");
        if self.0.as_ref() != Some(&msg) {
            eprintln!("flightdeck: {msg} (still {doing})");
            self.0 = Some(msg);
        }
    }
}

async fn summaries(
    api: &Api,
    name: Option<&str>,
) -> anyhow::Result<Vec<(serde_json::Value, ClusterSummary)>> {
    let v = api.get_json(&["clusters"]).await?;
    let items = match v {
        serde_json::Value::Object(mut m) => m.remove("items"),
        _ => None,
    };
    let Some(serde_json::Value::Array(items)) = items else {
        bail!(
            "the daemon at {} answered a cluster list without items",
            api.url_text()
        );
    };
    let mut out = Vec::new();
    for item in items {
        let s: ClusterSummary = api.typed(item.clone(), "cluster")?;
        if name.is_none_or(|n| n == s.name) {
            out.push((item, s));
        }
    }
    Ok(out)
}

/// What `get -w` printed last of each cluster.
struct Watcher {
    wide: bool,
    doc: Option<Format>,
    table: Table,
    /// Per cluster: what its last print showed (ages aside), and its last row.
    seen: BTreeMap<String, (String, Vec<String>)>,
}

impl Watcher {
    fn key(&self, v: &serde_json::Value, row: &[String]) -> String {
        if self.doc.is_some() {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("now");
            }
            return v.to_string();
        }
        let mut row = row.to_vec();
        if let Some(age) = row.get_mut(AGE_COLUMN) {
            age.clear();
        }
        row.join("\t")
    }

    fn show(&mut self, v: &serde_json::Value, s: &ClusterSummary) -> anyhow::Result<()> {
        let row = cluster_row(s, self.wide);
        let key = self.key(v, &row);
        if self.seen.get(&s.name).is_some_and(|(k, _)| *k == key) {
            return Ok(());
        }
        match self.doc {
            Some(Format::Yaml) => {
                outln!("---");
                print_doc(v, Format::Yaml)?;
            }
            Some(f) => print_doc(v, f)?,
            None => outln!("{}", self.table.line(&row)),
        }
        self.seen.insert(s.name.clone(), (key, row));
        Ok(())
    }

    /// Prints a last row, phase `Deleted`, for each cluster that is gone.
    fn gone(&mut self, present: &[(serde_json::Value, ClusterSummary)]) -> anyhow::Result<()> {
        let names: Vec<String> = self
            .seen
            .keys()
            .filter(|n| !present.iter().any(|(_, s)| s.name == **n))
            .cloned()
            .collect();
        for n in names {
            if let Some((_, mut row)) = self.seen.remove(&n)
                && self.doc.is_none()
            {
                if let Some(phase) = row.get_mut(2) {
                    *phase = "Deleted".into();
                }
                outln!("{}", self.table.line(&row));
            }
        }
        Ok(())
    }
}

/// `get clusters -w`: the table, then a row whenever a cluster changes, until Ctrl-C.
pub async fn watch(
    api: &Api,
    name: Option<&str>,
    output: Option<Format>,
) -> anyhow::Result<ExitCode> {
    if let Some(n) = name {
        api.get_json(&["clusters", n]).await?;
    }
    let wide = output == Some(Format::Wide);
    let doc = output.filter(|f| *f != Format::Wide);
    let first = summaries(api, name).await?;
    let header = cluster_header(wide);
    let rows: Vec<Vec<String>> = first.iter().map(|(_, s)| cluster_row(s, wide)).collect();
    let mut w = Watcher {
        wide,
        doc,
        table: Table::fit(&header, &rows),
        seen: BTreeMap::new(),
    };
    if doc.is_none() {
        outln!("{}", w.table.line(&header));
    }
    for (v, s) in &first {
        w.show(v, s)?;
    }
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    let mut hiccups = Hiccups::default();
    loop {
        let step = async {
            tokio::time::sleep(POLL).await;
            summaries(api, name).await
        };
        let result = tokio::select! {
            _ = &mut ctrl_c => return Ok(ExitCode::SUCCESS),
            r = step => r,
        };
        match result {
            Ok(items) => {
                hiccups = Hiccups::default();
                for (v, s) in &items {
                    w.show(v, s)?;
                }
                w.gone(&items)?;
            }
            Err(e) if fatal(&e) => return Err(e),
            Err(e) => hiccups.report(&e, "watching"),
        }
    }
}

/// `delete cluster NAME [--wait]`.
pub async fn delete(name: &str, args: &crate::DeleteArgs) -> anyhow::Result<ExitCode> {
    let api = connect(&ConnectArgs {
        server: args.server.clone(),
        state_dir: args.state_dir.clone(),
    })?;
    let mut url = api.endpoint(&["clusters", name]);
    if args.forget {
        url.query_pairs_mut().append_pair("forget", "true");
    }
    let v = api.send_json(api.request(Method::DELETE, url)).await?;
    let s: ClusterSummary = api.typed(v, "cluster")?;
    outln!("cluster/{} deleting ({})", s.name, s.cloud);
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    wait_deleted(&api, name, args.timeout).await
}

/// `Deleting, 3 machine(s) left, control plane 1/3 ready, workers 0/2 ready`.
pub fn deletion_progress(d: &ClusterDetail) -> String {
    let s = &d.summary;
    let mut parts = vec![s.phase.clone()];
    if let Ok(st) = serde_json::from_value::<flightdeck_plan::ClusterStatus>(d.status.clone()) {
        let machines: usize = std::iter::once(&st.control_plane)
            .chain(&st.node_pools)
            .map(|set| set.machines.len())
            .sum();
        parts.push(format!("{machines} machine(s) left"));
        if st.load_balancer.is_some() {
            parts.push("load balancer left".into());
        }
    }
    let ready: u32 = s.pools.iter().map(|p| p.ready).sum();
    let desired: u32 = s.pools.iter().map(|p| p.desired).sum();
    parts.push(format!(
        "control plane {}/{} ready",
        s.control_plane.ready, s.control_plane.desired
    ));
    parts.push(format!("workers {ready}/{desired} ready"));
    parts.join(", ")
}

async fn wait_deleted(
    api: &Api,
    name: &str,
    timeout: flightdeck_spec::Duration,
) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let limit = timeout.to_std();
    let mut last = String::from("no answer yet");
    let mut hiccups = Hiccups::default();
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    loop {
        let path = ["clusters", name];
        let result = tokio::select! {
            _ = &mut ctrl_c => return Ok(interrupted(name)),
            r = api.get_json(&path) => r,
        };
        match result {
            Err(e) if ApiFailure::is_not_found(&e) => {
                outln!("cluster/{name} deleted");
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) if fatal(&e) => return Err(e),
            Err(e) => hiccups.report(&e, "waiting"),
            Ok(v) => {
                hiccups = Hiccups::default();
                let d: ClusterDetail = api.typed(v, "cluster")?;
                let progress = deletion_progress(&d);
                if progress != last {
                    let secs = i128::from(start.elapsed().as_secs());
                    eprintln!("[{:>6}] cluster/{name}: {progress}", human_duration(secs));
                    last = progress;
                }
            }
        }
        let Some(left) = limit.checked_sub(start.elapsed()).filter(|d| !d.is_zero()) else {
            bail!(
                "timed out after {timeout}: cluster/{name} is not gone yet ({last}); the daemon goes on deleting it"
            );
        };
        tokio::select! {
            _ = &mut ctrl_c => return Ok(interrupted(name)),
            _ = tokio::time::sleep(left.min(POLL)) => {}
        }
    }
}

fn interrupted(name: &str) -> ExitCode {
    eprintln!("flightdeck: stopped waiting; the daemon goes on deleting cluster/{name}");
    ExitCode::from(130)
}

/// `events [NAME] [--follow] [--limit N]`.
pub async fn events(args: EventsArgs) -> anyhow::Result<ExitCode> {
    let api = connect(&args.connect)?;
    let mut url = match &args.name {
        Some(n) => api.endpoint(&["clusters", n, "events"]),
        None => api.endpoint(&["events"]),
    };
    if let Some(limit) = args.limit {
        url.query_pairs_mut()
            .append_pair("limit", &limit.to_string());
    }
    if !args.follow {
        let v = api.send_json(api.request(Method::GET, url)).await?;
        if let Some(f) = args.output {
            print_doc(&v, f.into())?;
            return Ok(ExitCode::SUCCESS);
        }
        let list: EventList = api.typed(v, "event list")?;
        if list.items.is_empty() {
            eprintln!("No events.");
        }
        for e in &list.items {
            outln!("{}", event_line(e));
        }
        return Ok(ExitCode::SUCCESS);
    }
    url.query_pairs_mut().append_pair("follow", "true");
    let rb = api.stream_request(url).header(ACCEPT, "text/event-stream");
    let mut response = api.send(rb).await?;
    let mut parser = Parser::default();
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    loop {
        let chunk = tokio::select! {
            _ = &mut ctrl_c => return Ok(ExitCode::SUCCESS),
            c = response.chunk() => c,
        };
        match chunk {
            Ok(Some(bytes)) => {
                for m in parser.push(&bytes)? {
                    print_message(&m, args.output)?;
                }
            }
            Ok(None) => {
                eprintln!("flightdeck: the daemon closed the event stream");
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(api.transport_error(&e)),
        }
    }
}

fn print_message(m: &Message, output: Option<DocFormat>) -> anyhow::Result<()> {
    match m {
        Message::Comment(c) if !c.trim().is_empty() => eprintln!("flightdeck: {}", c.trim()),
        Message::Comment(_) => {}
        Message::Event { kind, data } if kind == "event" => {
            let v: serde_json::Value = match serde_json::from_str(data) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("flightdeck: the daemon sent an event that is not JSON ({e})");
                    return Ok(());
                }
            };
            match output {
                Some(DocFormat::Json) => outln!("{v}"),
                Some(DocFormat::Yaml) => {
                    outln!("---");
                    print_doc(&v, Format::Yaml)?;
                }
                None => match serde_json::from_value::<EventView>(v) {
                    Ok(e) => outln!("{}", event_line(&e)),
                    Err(e) => eprintln!(
                        "flightdeck: the daemon sent an event this client does not understand ({e})"
                    ),
                },
            }
        }
        // The daemon ends a stream that fell a whole buffer behind, and says so.
        Message::Event { kind, data } if kind == "dropped" => {
            eprintln!("flightdeck: {}", data.trim());
        }
        Message::Event { .. } => {}
    }
    Ok(())
}
