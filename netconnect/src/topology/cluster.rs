//! Rows every network refers to: the control-plane protection policy
//! `ovnkube-default` (a COPP) with one rate-limiting meter per protocol, as
//! OVN-Kubernetes' default network controller creates them (ovn/copp.go), and the
//! `acl-logging` meter its ACLs name.
//!
//! These rows are *shared*: when an NB already has a COPP or meter of that name that
//! is not netconnect's (OVN-Kubernetes made it), that one is used and ours is not
//! created.

use nb_model::{Copp, Meter, MeterBand, MeterBandAction, MeterUnit};

use super::desired::Desired;
use crate::ovnk::ownership::Owner;

use crate::ovnk::ownership::DEFAULT_COPP;
/// The meter ACLs log through.
pub(crate) const ACL_LOGGING_METER: &str = "acl-logging";
/// The packets per second ACL logging is limited to: OVN-Kubernetes' default
/// `acl-logging-rate-limit` (`config.go`: `ACLLoggingRateLimit: 20`); the COPP's meters
/// drop at 25 (`copp.go`).
pub(crate) const ACL_LOGGING_RATE: i64 = 20;
/// The protocols rate-limited by the default COPP, in OVN-Kubernetes' order.
pub(crate) const PROTOCOLS: [&str; 9] = [
    "arp",
    "arp-resolve",
    "bfd",
    "event-elb",
    "icmp4-error",
    "icmp6-error",
    "reject",
    "tcp-reset",
    "svc-monitor",
];

/// The owner of the shared rows.
pub fn owner() -> Owner {
    crate::ovnk::ownership::cluster_owner()
}

/// The shared rows.
pub fn build() -> Desired {
    let mut d = Desired::new(owner());
    let band = MeterBand {
        action: MeterBandAction::Drop,
        rate: 25,
        ..Default::default()
    };
    let band = d.add("drop-25", band);
    let mut copp = Copp {
        name: DEFAULT_COPP.into(),
        ..Default::default()
    };
    for protocol in PROTOCOLS {
        let name = format!("{protocol}-rate-limiter");
        let meter = Meter {
            name: name.clone(),
            fair: Some(true),
            unit: MeterUnit::Pktps,
            bands: [band.clone()].into(),
            ..Default::default()
        };
        d.add_shared(name.clone(), meter);
        copp.meters.insert(protocol.into(), name);
    }
    d.add_shared(DEFAULT_COPP, copp);
    // The ACL logging meter has a band of its own, at OVN-Kubernetes' default
    // `acl-logging-rate-limit` (`createACLLoggingMeter`).
    let logging_band = MeterBand {
        action: MeterBandAction::Drop,
        rate: ACL_LOGGING_RATE,
        ..Default::default()
    };
    let logging_band = d.add(format!("drop-{ACL_LOGGING_RATE}"), logging_band);
    let acl_logging = Meter {
        name: ACL_LOGGING_METER.into(),
        fair: Some(true),
        unit: MeterUnit::Pktps,
        bands: [logging_band].into(),
        ..Default::default()
    };
    d.add_shared(ACL_LOGGING_METER, acl_logging);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_copp_names_a_meter_per_protocol() {
        let d = build();
        let copp = d.get::<Copp>(DEFAULT_COPP).unwrap();
        assert_eq!(copp.meters.len(), 9);
        assert_eq!(copp.meters["icmp4-error"], "icmp4-error-rate-limiter");
        let m = d.get::<Meter>("arp-rate-limiter").unwrap();
        assert_eq!(m.unit, MeterUnit::Pktps);
        assert_eq!(m.fair, Some(true));
        assert_eq!(m.bands.len(), 1);
        let band = d.get::<MeterBand>("drop-25").unwrap();
        assert_eq!((band.action, band.rate), (MeterBandAction::Drop, 25));
        assert!(d.row("Copp", DEFAULT_COPP).unwrap().shared);
    }

    #[test]
    fn the_acl_logging_meter_drops_at_ovn_kubernetes_default_rate_of_its_own() {
        // OVN-Kubernetes' `createACLLoggingMeter`: a band of its own at
        // `config.Logging.ACLLoggingRateLimit`, 20 by default.
        let d = build();
        let meter = d.get::<Meter>(ACL_LOGGING_METER).unwrap();
        assert_eq!(meter.bands.len(), 1);
        assert_eq!(d.identity_of(meter.bands.first().unwrap()), Some("drop-20"));
        let band = d.get::<MeterBand>("drop-20").unwrap();
        assert_eq!((band.action, band.rate), (MeterBandAction::Drop, 20));
    }
}
