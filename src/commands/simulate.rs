//! `edc-sync simulate`

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::cli::SimulateArgs;
use edc_core::error::IoContext;
use edc_core::Error;
use edc_sim::audit_trail::Arrivals;
use edc_sim::{Dataset, FaultSchedule, Profile, SimConfig, Simulator};

/// A flag value clap's own checks cannot refuse: a usage error (2), as
/// clap reports it, before the simulator starts.
fn usage(message: String) -> ! {
    use clap::CommandFactory;
    crate::cli::Cli::command()
        .error(clap::error::ErrorKind::ValueValidation, message)
        .exit()
}

/// Builds the simulator's configuration from the flags.
fn config(args: &SimulateArgs) -> SimConfig {
    let mut faults = FaultSchedule::default();
    for (n, fault) in &args.faults {
        faults.insert(*n, fault.clone());
    }
    if args.subjects == 0 {
        usage("--subjects must be at least 1".into());
    }
    let quota = match (args.quota_rate, args.quota_burst) {
        (Some(rate), Some(burst)) if rate.is_finite() && rate > 0.0 && burst >= 1 => Some((rate, burst)),
        (Some(rate), Some(burst)) => usage(format!(
            "--quota-rate must be > 0 and --quota-burst >= 1 (got {rate}, {burst})"
        )),
        _ => None,
    };
    SimConfig {
        dataset: Dataset {
            subjects: args.subjects,
            records: args.records,
            seed: args.seed,
            padding: args.padding,
        },
        profile: args.profile,
        token: args.token.clone(),
        username: args.username.clone(),
        password: args.password.clone(),
        login_path: args.login_path.clone(),
        session_ttl_requests: args.session_ttl_requests,
        token_lifetime: std::time::Duration::from_secs(args.token_lifetime_s),
        archived_records: args.archived_records,
        clock_skew_s: args.clock_skew_s,
        faults,
        quota,
        window_quota: args
            .window_calls
            .zip(args.window_s)
            .map(|(calls, s)| (calls, std::time::Duration::from_secs(s))),
        latency: Duration::from_millis(args.latency_ms),
        vault_burst: args.vault_burst,
        vault_daily: args.vault_daily,
        request_log: args.request_log.clone(),
        audit_trail: matches!(args.profile, Profile::Vault | Profile::Redcap)
            .then(|| vault_audit_trail(args.records)),
        ..SimConfig::default()
    }
}

/// The vault profile serves Vault's audit trail endpoint too, as the
/// shipped `veeva_vault` vendor reads it (Vault REST API reference,
/// "Retrieve Audit Details": `GET /api/{version}/audittrail/{type}`), and
/// the redcap profile the same changes as its Export Logging:
/// every record of the dataset stamped a quarter of a second apart, the
/// last three minutes before the simulator started, so a first run (whose
/// window closes `settle_lag_s` before the server's clock) takes them all.
fn vault_audit_trail(records: u32) -> Arrivals {
    let every = Duration::from_millis(250);
    let span = every * records + Duration::from_secs(180);
    Arrivals::every(std::time::SystemTime::now() - span, every)
}

pub fn run(args: SimulateArgs) -> Result<(), Error> {
    let config = config(&args);
    let rt = super::runtime()?;
    rt.block_on(async {
        let bind = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let sim = Simulator::start(config, bind)
            .await
            .io(|| format!("binding {bind}"))?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "edc-sync simulator listening on {}", sim.base_url())
            .and_then(|()| out.flush())
            .io(|| "writing to stdout".into())?;
        drop(out);
        shutdown_signal().await?;
        sim.stop().await;
        Ok(())
    })
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() -> Result<(), Error> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).io(|| "installing the SIGTERM handler".into())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.io(|| "waiting for SIGINT".into())?,
        _ = term.recv() => {}
    }
    Ok(())
}
