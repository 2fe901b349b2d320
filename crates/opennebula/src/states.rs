//! A VM's `STATE` and `LCM_STATE` (numbers from OpenNebula's `VirtualMachine.h`) as
//! the Nova-shaped [`ServerStatus`] flightdeck plans with.
//!
//! | OpenNebula | status | task_state | fault |
//! | --- | --- | --- | --- |
//! | INIT, PENDING, HOLD, CLONING; ACTIVE in LCM_INIT, PROLOG, BOOT | Build | | |
//! | ACTIVE + RUNNING | Active | | |
//! | ACTIVE + EPILOG, SHUTDOWN, CLEANUP_RESUBMIT, CLEANUP_DELETE | Active | `deleting` | |
//! | ACTIVE + any `*_FAILURE` LCM state; FAILED; CLONING_FAILURE | Error | | `OpenNebula LCM state BOOT_FAILURE` |
//! | ACTIVE + UNKNOWN (the hypervisor lost the VM) | Other(`UNKNOWN`) | | |
//! | ACTIVE + any other LCM state (migrating, hotplug, snapshot, ...) | Active | | |
//! | STOPPED, SUSPENDED, DONE, POWEROFF, UNDEPLOYED | Other(name) | | |

use flightdeck_cloud::ServerStatus;

/// What a VM's states mean to flightdeck.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmStatus {
    pub status: ServerStatus,
    pub task_state: Option<String>,
    pub fault: Option<String>,
}

/// `VmState` names, by number.
pub fn state_name(state: i64) -> Option<&'static str> {
    Some(match state {
        0 => "INIT",
        1 => "PENDING",
        2 => "HOLD",
        3 => "ACTIVE",
        4 => "STOPPED",
        5 => "SUSPENDED",
        6 => "DONE",
        7 => "FAILED",
        8 => "POWEROFF",
        9 => "UNDEPLOYED",
        10 => "CLONING",
        11 => "CLONING_FAILURE",
        _ => return None,
    })
}

/// `LcmState` names, by number (13 CANCEL and 14 FAILURE are gone since 5.0 but may
/// still be read from old records).
pub fn lcm_state_name(lcm: i64) -> Option<&'static str> {
    Some(match lcm {
        0 => "LCM_INIT",
        1 => "PROLOG",
        2 => "BOOT",
        3 => "RUNNING",
        4 => "MIGRATE",
        5 => "SAVE_STOP",
        6 => "SAVE_SUSPEND",
        7 => "SAVE_MIGRATE",
        8 => "PROLOG_MIGRATE",
        9 => "PROLOG_RESUME",
        10 => "EPILOG_STOP",
        11 => "EPILOG",
        12 => "SHUTDOWN",
        13 => "CANCEL",
        14 => "FAILURE",
        15 => "CLEANUP_RESUBMIT",
        16 => "UNKNOWN",
        17 => "HOTPLUG",
        18 => "SHUTDOWN_POWEROFF",
        19 => "BOOT_UNKNOWN",
        20 => "BOOT_POWEROFF",
        21 => "BOOT_SUSPENDED",
        22 => "BOOT_STOPPED",
        23 => "CLEANUP_DELETE",
        24 => "HOTPLUG_SNAPSHOT",
        25 => "HOTPLUG_NIC",
        26 => "HOTPLUG_SAVEAS",
        27 => "HOTPLUG_SAVEAS_POWEROFF",
        28 => "HOTPLUG_SAVEAS_SUSPENDED",
        29 => "SHUTDOWN_UNDEPLOY",
        30 => "EPILOG_UNDEPLOY",
        31 => "PROLOG_UNDEPLOY",
        32 => "BOOT_UNDEPLOY",
        33 => "HOTPLUG_PROLOG_POWEROFF",
        34 => "HOTPLUG_EPILOG_POWEROFF",
        35 => "BOOT_MIGRATE",
        36 => "BOOT_FAILURE",
        37 => "BOOT_MIGRATE_FAILURE",
        38 => "PROLOG_MIGRATE_FAILURE",
        39 => "PROLOG_FAILURE",
        40 => "EPILOG_FAILURE",
        41 => "EPILOG_STOP_FAILURE",
        42 => "EPILOG_UNDEPLOY_FAILURE",
        43 => "PROLOG_MIGRATE_POWEROFF",
        44 => "PROLOG_MIGRATE_POWEROFF_FAILURE",
        45 => "PROLOG_MIGRATE_SUSPEND",
        46 => "PROLOG_MIGRATE_SUSPEND_FAILURE",
        47 => "BOOT_UNDEPLOY_FAILURE",
        48 => "BOOT_STOPPED_FAILURE",
        49 => "PROLOG_RESUME_FAILURE",
        50 => "PROLOG_UNDEPLOY_FAILURE",
        51 => "DISK_SNAPSHOT_POWEROFF",
        52 => "DISK_SNAPSHOT_REVERT_POWEROFF",
        53 => "DISK_SNAPSHOT_DELETE_POWEROFF",
        54 => "DISK_SNAPSHOT_SUSPENDED",
        55 => "DISK_SNAPSHOT_REVERT_SUSPENDED",
        56 => "DISK_SNAPSHOT_DELETE_SUSPENDED",
        57 => "DISK_SNAPSHOT",
        59 => "DISK_SNAPSHOT_DELETE",
        60 => "PROLOG_MIGRATE_UNKNOWN",
        61 => "PROLOG_MIGRATE_UNKNOWN_FAILURE",
        62 => "DISK_RESIZE",
        63 => "DISK_RESIZE_POWEROFF",
        64 => "DISK_RESIZE_UNDEPLOYED",
        65 => "HOTPLUG_NIC_POWEROFF",
        66 => "HOTPLUG_RESIZE",
        67 => "HOTPLUG_SAVEAS_UNDEPLOYED",
        68 => "HOTPLUG_SAVEAS_STOPPED",
        69 => "BACKUP",
        70 => "BACKUP_POWEROFF",
        71 => "RESTORE",
        _ => return None,
    })
}

/// [`VmStatus`] for a VM's `STATE` and `LCM_STATE` (see the module table).
pub fn vm_status(state: i64, lcm: i64) -> VmStatus {
    let plain = |status| VmStatus {
        status,
        task_state: None,
        fault: None,
    };
    let error = |fault: String| VmStatus {
        status: ServerStatus::Error,
        task_state: None,
        fault: Some(fault),
    };
    match state {
        0..=2 | 10 => plain(ServerStatus::Build),
        3 => {
            let name = lcm_state_name(lcm);
            match lcm {
                0..=2 => plain(ServerStatus::Build),
                3 => plain(ServerStatus::Active),
                11 | 12 | 15 | 23 => VmStatus {
                    status: ServerStatus::Active,
                    task_state: Some("deleting".into()),
                    fault: None,
                },
                16 => plain(ServerStatus::Other("UNKNOWN".into())),
                _ => match name {
                    Some(n) if n.ends_with("FAILURE") => error(format!("OpenNebula LCM state {n}")),
                    Some(_) => plain(ServerStatus::Active),
                    None => plain(ServerStatus::Other(format!("LCM_STATE_{lcm}"))),
                },
            }
        }
        7 | 11 => error(format!(
            "OpenNebula state {}",
            state_name(state).unwrap_or("FAILED")
        )),
        _ => plain(ServerStatus::Other(
            state_name(state)
                .map(str::to_string)
                .unwrap_or_else(|| format!("STATE_{state}")),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn other(s: &str) -> ServerStatus {
        ServerStatus::Other(s.into())
    }

    #[test]
    fn vm_states_map_onto_server_status_task_state_and_fault() {
        use ServerStatus::*;
        let deleting = Some("deleting");
        // (STATE, LCM_STATE, status, task_state, fault)
        type Case = (
            i64,
            i64,
            ServerStatus,
            Option<&'static str>,
            Option<&'static str>,
        );
        let cases: &[Case] = &[
            (0, 0, Build, None, None),
            (1, 0, Build, None, None),
            (2, 0, Build, None, None),
            (3, 0, Build, None, None),
            (3, 1, Build, None, None),
            (3, 2, Build, None, None),
            (10, 0, Build, None, None),
            (3, 3, Active, None, None),
            (3, 17, Active, None, None),
            (3, 4, Active, None, None),
            (3, 11, Active, deleting, None),
            (3, 12, Active, deleting, None),
            (3, 15, Active, deleting, None),
            (3, 23, Active, deleting, None),
            (
                3,
                36,
                Error,
                None,
                Some("OpenNebula LCM state BOOT_FAILURE"),
            ),
            (
                3,
                39,
                Error,
                None,
                Some("OpenNebula LCM state PROLOG_FAILURE"),
            ),
            (
                3,
                40,
                Error,
                None,
                Some("OpenNebula LCM state EPILOG_FAILURE"),
            ),
            (3, 14, Error, None, Some("OpenNebula LCM state FAILURE")),
            (
                3,
                61,
                Error,
                None,
                Some("OpenNebula LCM state PROLOG_MIGRATE_UNKNOWN_FAILURE"),
            ),
            (7, 0, Error, None, Some("OpenNebula state FAILED")),
            (11, 0, Error, None, Some("OpenNebula state CLONING_FAILURE")),
            (3, 16, other("UNKNOWN"), None, None),
            (3, 99, other("LCM_STATE_99"), None, None),
            (4, 0, other("STOPPED"), None, None),
            (5, 0, other("SUSPENDED"), None, None),
            (6, 0, other("DONE"), None, None),
            (8, 0, other("POWEROFF"), None, None),
            (9, 0, other("UNDEPLOYED"), None, None),
            (42, 0, other("STATE_42"), None, None),
        ];
        for (state, lcm, status, task, fault) in cases {
            let got = vm_status(*state, *lcm);
            assert_eq!(
                got,
                VmStatus {
                    status: status.clone(),
                    task_state: task.map(str::to_string),
                    fault: fault.map(str::to_string),
                },
                "STATE {state} LCM_STATE {lcm}"
            );
        }
    }

    #[test]
    fn every_failure_lcm_state_is_an_error() {
        let failures: Vec<i64> = (0..100)
            .filter(|&n| lcm_state_name(n).is_some_and(|s| s.ends_with("FAILURE")))
            .collect();
        assert_eq!(
            failures,
            vec![14, 36, 37, 38, 39, 40, 41, 42, 44, 46, 47, 48, 49, 50, 61]
        );
        for lcm in failures {
            assert_eq!(vm_status(3, lcm).status, ServerStatus::Error, "{lcm}");
        }
    }
}
