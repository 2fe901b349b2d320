use clap::{CommandFactory, Parser};

use crate::client::legacy::{Mode, delete_mode, offline_resume_dir};
use crate::client::{DocFormat, Format};
use crate::{Cli, Command, SimCommand};

fn parse(args: &[&str]) -> Command {
    let mut argv = vec!["flightdeck"];
    argv.extend(args);
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli.command,
        Err(e) => panic!("{args:?} does not parse: {e}"),
    }
}

fn refused(args: &[&str]) -> String {
    let mut argv = vec!["flightdeck"];
    argv.extend(args);
    match Cli::try_parse_from(argv) {
        Ok(_) => panic!("{args:?} parses"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn get_describe_apply_and_events_parse() {
    let Command::Get(g) = parse(&["get", "clusters", "-o", "wide", "-w"]) else {
        panic!("not get")
    };
    assert_eq!(
        (g.name, g.output, g.watch),
        (None, Some(Format::Wide), true)
    );
    let Command::Get(g) = parse(&[
        "get",
        "cluster",
        "demo",
        "-o",
        "yaml",
        "--server",
        "http://h:1",
    ]) else {
        panic!("not get")
    };
    assert_eq!(g.name.as_deref(), Some("demo"));
    assert_eq!(g.connect.server.server.as_deref(), Some("http://h:1"));
    assert!(refused(&["get", "pods"]).contains("invalid value 'pods'"));
    let Command::Describe(d) = parse(&["describe", "cluster", "demo", "--state-dir", "/s"]) else {
        panic!("not describe")
    };
    assert_eq!(d.name.as_deref(), Some("demo"));
    let Command::Apply(a) = parse(&["apply", "-f", "demo.yaml", "--token-file", "/t"]) else {
        panic!("not apply")
    };
    assert_eq!(a.file.to_str(), Some("demo.yaml"));
    let Command::Events(e) = parse(&["events", "demo", "--follow", "--limit", "5", "-o", "json"])
    else {
        panic!("not events")
    };
    assert_eq!(
        (e.name.as_deref(), e.follow, e.limit, e.output),
        (Some("demo"), true, Some(5), Some(DocFormat::Json))
    );
}

#[test]
fn every_client_verb_takes_a_ca_file() {
    let Command::Get(g) = parse(&["get", "clusters", "--ca-file", "/etc/fleet-ca.pem"]) else {
        panic!("not get")
    };
    assert_eq!(
        g.connect.server.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/fleet-ca.pem"))
    );
    let Command::Delete(d) = parse(&["delete", "cluster", "demo", "--ca-file", "ca.pem"]) else {
        panic!("not delete")
    };
    assert!(d.server.ca_file.is_some());
}

#[test]
fn plan_takes_a_name_or_a_file() {
    let Command::Plan(p) = parse(&["plan", "demo"]) else {
        panic!("not plan")
    };
    assert_eq!((p.name.as_deref(), p.file), (Some("demo"), None));
    let Command::Plan(p) = parse(&["plan", "-f", "demo.yaml", "--output", "json"]) else {
        panic!("not plan")
    };
    assert_eq!(p.file.as_ref().and_then(|f| f.to_str()), Some("demo.yaml"));
    assert!(refused(&["plan", "demo", "-f", "demo.yaml"]).contains("cannot be used with"));
    assert!(
        refused(&["plan", "-f", "demo.yaml", "--server", "http://h:1"])
            .contains("cannot be used with")
    );
    assert!(refused(&["plan"]).contains("required"));
}

#[test]
fn delete_keeps_its_offline_form() {
    let Command::Delete(d) = parse(&["delete", "cluster", "demo", "--wait", "--timeout", "5m"])
    else {
        panic!("not delete")
    };
    assert!(matches!(delete_mode(&d), Mode::Daemon(n) if n == "demo"));
    assert_eq!(d.timeout.to_string(), "5m");
    let offline = ["delete", "demo", "--state-dir", "/s", "--cloud", "c"];
    let Command::Delete(d) = parse(&offline) else {
        panic!("not delete")
    };
    assert!(matches!(delete_mode(&d), Mode::Offline));
    let wrong = |args: &[&str]| {
        let Command::Delete(d) = parse(args) else {
            panic!("not delete")
        };
        match delete_mode(&d) {
            Mode::Wrong(e) => e.to_string(),
            _ => panic!("{args:?} is accepted"),
        }
    };
    assert!(wrong(&["delete", "demo"]).contains("write `flightdeck delete cluster demo`"));
    assert!(
        wrong(&["delete", "demo", "--wait"]).contains("--wait belongs to `delete cluster demo`")
    );
    assert!(
        wrong(&["delete", "cluster", "demo", "--cloud", "c"])
            .contains("--cloud belongs to the offline form")
    );
    assert!(wrong(&["delete", "pod", "demo"]).contains("write `delete cluster demo`"));
    assert!(
        wrong(&["delete", "demo", "--ca-file", "/ca.pem"])
            .contains("--ca-file belongs to `delete cluster demo`")
    );
    assert!(refused(&["delete", "cluster", "demo", "extra"]).contains("unexpected argument"));
    // Nodes come through spec.workload.kubeconfig: simulated kubelets left the CLI.
    assert!(
        refused(&[
            "delete",
            "demo",
            "--state-dir",
            "/s",
            "--cloud",
            "c",
            "--simulated-nodes"
        ])
        .contains("unexpected argument")
    );
}

#[test]
fn resume_is_offline_only_where_no_daemon_ever_ran() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path");
    let resume = |args: &[&str]| {
        let Command::Resume(r) = parse(args) else {
            panic!("not resume")
        };
        offline_resume_dir(&r)
    };
    assert_eq!(resume(&["resume", "demo"]), None);
    assert_eq!(
        resume(&["resume", "demo", "--state-dir", d]).as_deref(),
        Some(dir.path())
    );
    assert_eq!(
        resume(&["resume", "demo", "--state-dir", d, "--server", "http://h:1"]),
        None
    );
    std::fs::write(dir.path().join("api.url"), "http://127.0.0.1:7443\n").expect("write");
    assert_eq!(resume(&["resume", "demo", "--state-dir", d]), None);
}

#[test]
fn sim_faults_parse() {
    let Command::Sim(SimCommand::Fault(f)) = parse(&[
        "sim",
        "fault",
        "api.latency",
        "--cluster",
        "demo",
        "--for",
        "2m",
        "--latency",
        "60s",
        "--rate",
        "0.5",
        "--count",
        "3",
        "--service",
        "nova",
    ]) else {
        panic!("not sim fault")
    };
    assert_eq!(f.kind.as_deref(), Some("api.latency"));
    assert_eq!(f.duration.map(|d| d.to_string()).as_deref(), Some("2m"));
    assert_eq!(f.latency.map(|d| d.to_string()).as_deref(), Some("1m"));
    assert_eq!(
        (f.rate, f.count, f.service.as_deref()),
        (Some(0.5), Some(3), Some("nova"))
    );
    assert!(refused(&["sim", "fault", "nova.bootError"]).contains("--cluster"));
    assert!(
        refused(&["sim", "fault", "x", "--cluster", "c", "--for", "soon"])
            .contains("invalid duration")
    );
    assert!(matches!(
        parse(&["sim", "faults"]),
        Command::Sim(SimCommand::Faults(_))
    ));
}

/// `sim fault --stop ID` needs no KIND nor --cluster, and takes none of a new fault's.
#[test]
fn sim_fault_stop_takes_an_id_and_nothing_a_new_fault_needs() {
    let Command::Sim(SimCommand::Fault(f)) = parse(&["sim", "fault", "--stop", "7"]) else {
        panic!("not sim fault")
    };
    assert_eq!((f.stop, f.kind.as_deref()), (Some(7), None));
    assert!(refused(&["sim", "fault", "--stop", "7", "nova.bootError"]).contains("--stop"));
    assert!(refused(&["sim", "fault", "--stop", "7", "--cluster", "demo"]).contains("--stop"));
    assert!(refused(&["sim", "fault", "--stop", "seven"]).contains("invalid value"));
    assert!(refused(&["sim", "fault", "--cluster", "demo"]).contains("<KIND>"));
}
