use super::*;

const SCENARIO: FaultSite = FaultSite::Scenario(Duration::from_mins(60));

fn error_rate(rate: f64) -> Fault {
    Fault {
        service: Some(Service::Nova),
        rate: Some(rate),
        ..Fault::new(FaultKind::ApiErrorRate, Duration::ZERO)
    }
}

fn refused(f: &Fault, site: FaultSite) -> (String, String) {
    f.validate_at(site).expect_err("refused")
}

/// A rate is a fraction: -1, 0, 1e308 and the infinities are refused in a scenario and
/// live alike, naming `rate` and the value.
#[test]
fn a_rate_outside_0_to_1_is_refused_naming_the_field_and_the_value() {
    for site in [SCENARIO, FaultSite::Live] {
        for (rate, shown) in [
            (-1.0, "-1"),
            (0.0, "0"),
            (1.000_001, "1.000001"),
            (1e308, "1000000000"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "NaN"),
        ] {
            let (field, problem) = refused(&error_rate(rate), site);
            assert_eq!(field, "rate", "{rate}");
            assert!(
                problem.contains("rate") && problem.contains(shown),
                "{rate}: {problem}"
            );
        }
        for rate in [0.05, 0.5, 1.0] {
            error_rate(rate).validate_at(site).expect("a fraction");
        }
    }
}

/// `count` names at least one object and at most `FAULT_COUNT_MAX`.
#[test]
fn a_count_of_0_or_past_its_bound_is_refused_naming_the_field_and_the_value() {
    for count in [0, FAULT_COUNT_MAX + 1, u32::MAX] {
        let f = Fault {
            count: Some(count),
            ..Fault::new(FaultKind::RuleLost, Duration::ZERO)
        };
        let (field, problem) = refused(&f, SCENARIO);
        assert_eq!(field, "count");
        assert!(
            problem.contains("count") && problem.contains(&count.to_string()),
            "{problem}"
        );
    }
    let f = Fault {
        count: Some(FAULT_COUNT_MAX),
        ..Fault::new(FaultKind::RuleLost, Duration::ZERO)
    };
    f.validate_at(SCENARIO).expect("at the bound");
}

/// Times are positive and bounded: a fault's `duration`, an `api.latency`'s `latency`,
/// an `api.staleRead`'s lag and an `api.rateLimit`'s `retryAfter`.
#[test]
fn times_of_0_or_past_their_bound_are_refused_naming_the_field_and_the_value() {
    let day_and_a_minute = Duration::from_mins(24 * 60 + 1);
    let cases = [
        (
            "duration",
            Fault {
                duration: Some(Duration::ZERO),
                ..Fault::new(FaultKind::EmptyNodeList, Duration::ZERO)
            },
            "0s",
        ),
        (
            "duration",
            Fault {
                duration: Some(day_and_a_minute),
                ..Fault::new(FaultKind::EmptyNodeList, Duration::ZERO)
            },
            "24h1m",
        ),
        (
            "latency",
            Fault {
                service: Some(Service::Nova),
                latency: Some(Duration::from_mins(61)),
                ..Fault::new(FaultKind::ApiLatency, Duration::ZERO)
            },
            "1h1m",
        ),
        (
            "latency",
            Fault {
                service: Some(Service::Nova),
                latency: Some(Duration::ZERO),
                ..Fault::new(FaultKind::ApiLatency, Duration::ZERO)
            },
            "0s",
        ),
        (
            "latency",
            Fault {
                service: Some(Service::Nova),
                latency: Some(Duration::from_mins(11)),
                ..Fault::new(FaultKind::ApiStaleRead, Duration::ZERO)
            },
            "11m",
        ),
        (
            "retryAfter",
            Fault {
                service: Some(Service::Nova),
                rate: Some(0.5),
                retry_after: Some(Duration::from_millis(500)),
                ..Fault::new(FaultKind::ApiRateLimit, Duration::ZERO)
            },
            "500ms",
        ),
        (
            "retryAfter",
            Fault {
                service: Some(Service::Nova),
                rate: Some(0.5),
                retry_after: Some(Duration::from_mins(61)),
                ..Fault::new(FaultKind::ApiRateLimit, Duration::ZERO)
            },
            "1h1m",
        ),
    ];
    for (field, fault, shown) in cases {
        for site in [SCENARIO, FaultSite::Live] {
            let (got, problem) = refused(&fault, site);
            assert_eq!(got, field, "{problem}");
            assert!(problem.contains(shown), "{field}: {problem}");
        }
    }
}

/// Live (the daemon labels each call with its cluster), an API fault may aim at one
/// cluster; in a scenario, whose calls carry no cluster, it may not; a kind that acts
/// on what every cluster shares may aim at none, and says why.
#[test]
fn cluster_is_taken_where_the_kind_can_be_aimed_and_refused_with_the_reason_elsewhere() {
    let demo = Name::new("demo").ok();
    let api = Fault {
        cluster: demo.clone(),
        ..error_rate(0.5)
    };
    api.validate_at(FaultSite::Live).expect("a labelled call");
    let (field, problem) = refused(&api, SCENARIO);
    assert_eq!(field, "cluster");
    assert!(problem.contains("api.errorRate"), "{problem}");

    let revoke = Fault {
        cluster: demo.clone(),
        ..Fault::new(FaultKind::KeystoneRevokeTokens, Duration::ZERO)
    };
    for site in [SCENARIO, FaultSite::Live] {
        let (field, problem) = refused(&revoke, site);
        assert_eq!(field, "cluster");
        assert!(
            problem.contains("keystone.revokeTokens") && problem.contains("tokens"),
            "{problem}"
        );
    }

    let rules = Fault {
        cluster: demo,
        ..Fault::new(FaultKind::RuleLost, Duration::ZERO)
    };
    rules.validate_at(SCENARIO).expect("tagged objects");
    rules.validate_at(FaultSite::Live).expect("tagged objects");
}

/// Live, an API fault without `service` hits every service, one without `rate` every
/// call; a scenario still names both.
#[test]
fn live_an_api_fault_may_leave_the_service_and_the_rate_out() {
    let every_service = Fault {
        service: None,
        ..error_rate(0.5)
    };
    every_service
        .validate_at(FaultSite::Live)
        .expect("every service");
    assert_eq!(refused(&every_service, SCENARIO).0, "service");
    let every_call = Fault {
        rate: None,
        ..error_rate(0.5)
    };
    every_call.validate_at(FaultSite::Live).expect("every call");
    assert_eq!(refused(&every_call, SCENARIO).0, "rate");
}
