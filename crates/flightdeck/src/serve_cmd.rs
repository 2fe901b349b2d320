//! `flightdeck sim serve`: the simulated OpenStack over HTTP, in real time, and with
//! `--opennebula` the simulated OpenNebula's XML-RPC API from the same simulator.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_scenario::load_scenario;
use flightdeck_sim::{SimCloud, SimConfig, SimFault};
use flightdeck_sim_http::{ServeOptions, serve, serve_opennebula};

use crate::ServeArgs;

/// The one OpenNebula user the simulator knows.
const ONE_USER: &str = "oneadmin";

/// The wall clock, read here at the binary's edge only.
fn wall() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !(args.speed.is_finite() && args.speed > 0.0 && args.speed <= 1000.0) {
        bail!(
            "--speed must be a number above 0 and at most 1000, got {}",
            args.speed
        );
    }
    let start = wall();
    let clock = SimClock::new(start);
    let config = SimConfig::default();
    let one_password = config.one_password.clone();
    let cloud = Arc::new(SimCloud::new(config, args.seed, clock.clone()));
    if let Some(name) = &args.scenario {
        let loaded = load_scenario(name)?;
        for f in &loaded.scenario.spec.faults {
            cloud.inject(SimFault::from_spec(f, start));
        }
        let mut routers = std::collections::BTreeSet::new();
        for c in &loaded.clusters {
            if let Some(r) = c
                .spec
                .provider
                .openstack
                .as_ref()
                .and_then(|o| o.router.as_ref())
                && routers.insert(r.to_string())
            {
                cloud.add_foreign_router(r.as_str());
            }
        }
        eprintln!(
            "scenario {}: {} fault(s) scheduled from now on",
            loaded.scenario.metadata.name,
            loaded.scenario.spec.faults.len()
        );
    }
    // Virtual time follows the wall clock, scaled by --speed.
    let speed = args.speed;
    let ticker = clock.clone();
    let began = Instant::now();
    let tick_cloud = cloud.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let elapsed = began.elapsed().as_secs_f64() * speed * 1000.0;
            ticker.advance_to(start.plus_millis(elapsed as u64));
            tick_cloud.advance();
        }
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    // Every listener is bound before any file is written: a client that finds the
    // files finds every server.
    let one_listener = match args.opennebula {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--opennebula)"))?,
        ),
        None => None,
    };
    let base = format!("http://{}", listener.local_addr()?);
    let options = ServeOptions::default();
    std::fs::write(
        &args.clouds_file,
        options.clouds_yaml("flightdeck-sim", &base),
    )
    .with_context(|| format!("cannot write {}", args.clouds_file.display()))?;
    println!("simulated OpenStack at {base} (Keystone: {base}/identity/v3)");
    println!(
        "clouds.yaml entry \"flightdeck-sim\" written to {}; use it with:",
        args.clouds_file.display()
    );
    println!(
        "  export OS_CLIENT_CONFIG_FILE={} OS_CLOUD=flightdeck-sim",
        args.clouds_file.display()
    );
    let Some(one_listener) = one_listener else {
        serve(cloud, listener, options).await?;
        return Ok(ExitCode::SUCCESS);
    };
    let endpoint = format!("http://{}/RPC2", one_listener.local_addr()?);
    println!("simulated OpenNebula at {endpoint} (XML-RPC, user {ONE_USER})");
    if let Some(path) = &args.one_auth_file {
        write_private(path, &format!("{ONE_USER}:{one_password}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("ONE_AUTH file written to {}; use it with:", path.display());
        println!("  export ONE_XMLRPC={endpoint} ONE_AUTH={}", path.display());
    }
    if let Some(path) = &args.one_xmlrpc_file {
        std::fs::write(path, format!("{endpoint}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    tokio::try_join!(
        serve(cloud.clone(), listener, options),
        serve_opennebula(cloud, one_listener),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `contents` to `path` readable by its owner only (mode 0600 on Unix), also
/// when the file already exists with a wider mode: it is narrowed before anything is
/// written.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_one_auth_file_is_private_even_when_it_existed_wider() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("one_auth");
        std::fs::write(&path, "old contents that are longer\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, "oneadmin:secret\n").expect("write_private");
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "oneadmin:secret\n"
        );
    }
}
