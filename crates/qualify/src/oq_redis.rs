//! What the OQ leaves in the Redis it is given (`--redis`): nothing that
//! changes the next run's result.
//!
//! Its pacing keys live under its own quota (`rl:oq-shared:...`, which no
//! site policy uses): the pause and the run locks expire, the fencing
//! counters only ever count up. Its trails' anchors would not do: a rerun
//! into the same evidence directory starts each scenario's trail anew,
//! which the anchor left by the previous run rightly refuses as a trail
//! replaced in place. The OQ owns those trails, so it removes their anchors
//! before a scenario (a run that was interrupted) and after it.
//!
//! Without `--redis` nothing is chosen for the reviewer: the Redis
//! scenarios are NOT EXECUTED, as validation/OQ.md says.

use std::path::Path;

use edc_core::audit::Anchors;

/// Removes the anchors Redis at `url` keeps for the trail `trail`; a
/// failure is logged and left for the scenario's own run to meet.
pub async fn forget_anchors(url: &str, trail: &Path) {
    let forgotten = match Anchors::connect_redis(url).await {
        Ok(redis) => Anchors::forget_redis(&redis, trail)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match forgotten {
        Ok(n) => {
            tracing::debug!(trail = %trail.display(), keys = n, "removed the OQ trail's anchors from Redis")
        }
        Err(e) => {
            tracing::warn!(trail = %trail.display(), "could not remove the OQ trail's anchors from Redis: {e}")
        }
    }
}
