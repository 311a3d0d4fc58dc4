//! `edc-sync simulate`

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::{SimProfile, SimulateArgs};
use edc_sim::{Dataset, FaultSchedule, Profile, SimConfig, Simulator};

/// Builds the simulator's configuration from the flags.
pub fn config(args: &SimulateArgs) -> anyhow::Result<SimConfig> {
    let mut faults = FaultSchedule::default();
    for (n, fault) in &args.faults {
        faults.insert(*n, fault.clone());
    }
    if args.subjects == 0 {
        bail!("--subjects must be at least 1");
    }
    let quota = match (args.quota_rate, args.quota_burst) {
        (Some(rate), Some(burst)) if rate.is_finite() && rate > 0.0 && burst >= 1 => Some((rate, burst)),
        (Some(rate), Some(burst)) => {
            bail!("--quota-rate must be > 0 and --quota-burst >= 1 (got {rate}, {burst})")
        }
        _ => None,
    };
    Ok(SimConfig {
        dataset: Dataset {
            subjects: args.subjects,
            records: args.records,
            seed: args.seed,
            padding: args.padding,
        },
        profile: match args.profile {
            SimProfile::Generic => Profile::Generic,
            SimProfile::Rave => Profile::Rave,
            SimProfile::Vault => Profile::Vault,
        },
        token: args.token.clone(),
        username: args.username.clone(),
        password: args.password.clone(),
        login_path: args.login_path.clone(),
        session_ttl_requests: args.session_ttl_requests,
        clock_skew_s: args.clock_skew_s,
        faults,
        quota,
        latency: Duration::from_millis(args.latency_ms),
        vault_burst: args.vault_burst,
        request_log: args.request_log.clone(),
        ..SimConfig::default()
    })
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let config = config(&args)?;
    let rt = super::runtime()?;
    rt.block_on(async {
        let bind = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let sim = Simulator::start(config, bind)
            .await
            .with_context(|| format!("binding {bind}"))?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "edc-sync simulator listening on {}", sim.base_url())?;
        out.flush()?;
        drop(out);
        shutdown_signal().await?;
        sim.stop().await;
        Ok(())
    })
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
