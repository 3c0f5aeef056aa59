//! Polite settings of a volunteer's worker: the scheduling priority of its search threads, the
//! hours of the day it may search, and whether it pauses on battery (BOINC's computing
//! preferences). The CPU share is the runner's (`bookfarm_runner::Throttle`).
//!
//! Everything that decides is a pure function of its inputs: the local time of day is passed in
//! (a [`LocalClock`]), and the power supplies are read from a directory laid out like Linux's
//! power-supply class (`/sys/class/power_supply`), so tests use a fake one.

use bookfarm_runner::polite::{Gate, GateState};
use chrono::Timelike;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Seconds in a day.
const DAY: u32 = 24 * 3600;

/// Where Linux lists the power supplies.
pub const POWER_SUPPLY_DIR: &str = "/sys/class/power_supply";

/// The polite settings of a worker process (`worker.toml`, flags).
#[derive(Debug, Clone, PartialEq)]
pub struct PoliteSettings {
    /// Scheduling priority of the search threads.
    pub priority: Priority,
    /// Share of each search thread's core, 0.01..=1 (see `bookfarm_runner::polite::Throttle`).
    pub cpu_share: f64,
    /// Hours of the day when the worker may search (None: always).
    pub active_hours: Option<ActiveHours>,
    /// Pause while the machine runs on its battery.
    pub pause_on_battery: bool,
    /// A paused worker holds no lease longer than this.
    pub pause_grace: Duration,
    /// The power-supply class directory watched for the battery.
    pub power_supply: PathBuf,
    /// Period of the progress line (None: none).
    pub progress_every: Option<Duration>,
}

impl Default for PoliteSettings {
    /// What an embedded worker does without being told: the process's own priority, no cap,
    /// no pause, no progress line (`bookfarm-worker run` starts from
    /// [`PoliteSettings::volunteer`]).
    fn default() -> Self {
        PoliteSettings {
            priority: Priority::Normal,
            cpu_share: 1.0,
            active_hours: None,
            pause_on_battery: false,
            pause_grace: Duration::from_secs(30),
            power_supply: PathBuf::from(POWER_SUPPLY_DIR),
            progress_every: None,
        }
    }
}

impl PoliteSettings {
    /// The defaults of `bookfarm-worker run`: idle priority, pause on battery, a progress line
    /// every minute.
    pub fn volunteer() -> PoliteSettings {
        PoliteSettings {
            priority: Priority::Idle,
            pause_on_battery: true,
            progress_every: Some(Duration::from_secs(60)),
            ..PoliteSettings::default()
        }
    }

    /// Whether the worker searches only part of the time: it has active hours, or pauses on a
    /// battery it has.
    pub fn part_time(&self) -> bool {
        self.active_hours.is_some() || (self.pause_on_battery && has_battery(&self.power_supply))
    }

    /// The gate of these settings (None: nothing ever pauses the worker).
    pub fn gate(&self) -> Option<PoliteGate> {
        (self.active_hours.is_some() || self.pause_on_battery).then(|| PoliteGate {
            hours: self.active_hours.clone(),
            power_supply: self.pause_on_battery.then(|| self.power_supply.clone()),
            clock: Box::new(SystemLocalClock),
        })
    }
}

/// Scheduling priority of the search threads (the loop and the network calls keep the
/// process's own, so heartbeats go on however busy the machine is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// `SCHED_IDLE` on Linux: the threads run only when nothing else wants the CPU (the
    /// lowest priority there is; the lowest thread priority on other systems).
    #[default]
    Idle,
    /// Nice 19 (the lowest nice value): other work comes first, but the threads still get a
    /// small share on a busy machine.
    Low,
    /// The process's own priority.
    Normal,
}

/// A setting that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// Not a priority name.
    #[error("priority {0:?}: expected idle, low or normal")]
    Priority(String),
    /// Not a list of time ranges.
    #[error(
        "active hours {0:?}: expected HH:MM-HH:MM[,HH:MM-HH:MM…] in local time (e.g. 19:00-07:30)"
    )]
    Hours(String),
}

impl FromStr for Priority {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<Priority, SettingError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "idle" => Ok(Priority::Idle),
            "low" => Ok(Priority::Low),
            "normal" => Ok(Priority::Normal),
            _ => Err(SettingError::Priority(s.to_string())),
        }
    }
}

impl Priority {
    /// Apply to the calling thread (called by each search thread as it starts).
    pub fn apply_to_current_thread(self) -> Result<(), String> {
        use thread_priority::ThreadPriority;
        #[cfg(unix)]
        use thread_priority::ThreadSchedulePolicy;
        match self {
            Priority::Normal => Ok(()),
            #[cfg(unix)]
            Priority::Idle | Priority::Low => {
                use thread_priority::unix::{
                    NormalThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
                };
                let policy = if self == Priority::Idle && cfg!(target_os = "linux") {
                    NormalThreadSchedulePolicy::Idle
                } else {
                    NormalThreadSchedulePolicy::Other
                };
                set_thread_priority_and_policy(
                    thread_native_id(),
                    ThreadPriority::Min,
                    ThreadSchedulePolicy::Normal(policy),
                )
                .map_err(|e| format!("{e:?}"))
            }
            #[cfg(not(unix))]
            Priority::Idle | Priority::Low => {
                thread_priority::set_current_thread_priority(ThreadPriority::Min)
                    .map_err(|e| format!("{e:?}"))
            }
        }
    }

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Idle => "idle",
            Priority::Low => "low",
            Priority::Normal => "normal",
        }
    }
}

/// The hours of the day (local time) when the worker may search: half-open ranges of seconds
/// of the day, merged, sorted, within `0..DAY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveHours {
    ranges: Vec<(u32, u32)>,
    text: String,
}

/// Whether the active hours allow searching at some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoursState {
    /// Inside the hours: searching is allowed for `left` more (None: all day).
    Active {
        /// Time to the end of the active stretch.
        left: Option<Duration>,
    },
    /// Outside: the next stretch starts in `starts_in`.
    Inactive {
        /// Time to the start of the next active stretch.
        starts_in: Duration,
    },
}

fn clock_time(s: &str) -> Option<u32> {
    let (h, m) = s.trim().split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    ((h < 24 && m < 60) || (h == 24 && m == 0)).then_some(h * 3600 + m * 60)
}

impl FromStr for ActiveHours {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<ActiveHours, SettingError> {
        let bad = || SettingError::Hours(s.chars().take(80).collect());
        let mut raw = Vec::new();
        for part in s.split(',') {
            let (a, b) = part.split_once('-').ok_or_else(bad)?;
            let (a, b) = (
                clock_time(a).ok_or_else(bad)?,
                clock_time(b).ok_or_else(bad)?,
            );
            if a == b {
                return Err(bad());
            }
            // A range that wraps midnight is two ranges of one day.
            if a < b {
                raw.push((a, b));
            } else {
                raw.push((a, DAY));
                raw.push((0, b));
            }
        }
        raw.sort_unstable();
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for (a, b) in raw {
            match ranges.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => ranges.push((a, b)),
            }
        }
        Ok(ActiveHours {
            ranges,
            text: s.trim().to_string(),
        })
    }
}

impl std::fmt::Display for ActiveHours {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl ActiveHours {
    /// Where `now` (seconds since local midnight) stands.
    pub fn at(&self, now: u32) -> HoursState {
        let now = now % DAY;
        let secs = |s: u32| Duration::from_secs(u64::from(s));
        if self.ranges == [(0, DAY)] {
            return HoursState::Active { left: None };
        }
        match self.ranges.iter().find(|(a, b)| *a <= now && now < *b) {
            Some(&(_, end)) => {
                // A stretch that reaches midnight goes on in the first range of the next day.
                let more = match self.ranges.first() {
                    Some(&(0, first_end)) if end == DAY => first_end,
                    _ => 0,
                };
                HoursState::Active {
                    left: Some(secs(end - now + more)),
                }
            }
            None => {
                let next = self
                    .ranges
                    .iter()
                    .map(|(a, _)| *a)
                    .find(|a| *a > now)
                    .map_or_else(|| DAY - now + self.ranges[0].0, |a| a - now);
                HoursState::Inactive {
                    starts_in: secs(next),
                }
            }
        }
    }
}

/// Whether the machine runs on its battery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// On mains (or no power supply is known: a desktop).
    Mains,
    /// On battery.
    Battery,
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The power supplies of a power-supply class directory: each entry's `type` and its
/// `online` (mains, USB) or `status` (battery).
fn supplies(dir: &Path) -> Vec<(String, Option<String>, Option<String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let kind = read_trimmed(&p.join("type"))?;
            Some((
                kind,
                read_trimmed(&p.join("online")),
                read_trimmed(&p.join("status")),
            ))
        })
        .collect()
}

/// The machine's power source, from a power-supply class directory (systemd's `on_ac_power`
/// rule): on mains when an external supply (mains, USB, UPS…) is online; on battery when such
/// supplies exist and none is online, or when none is online and a battery discharges; on mains
/// otherwise (no supply known: a desktop, or a directory that cannot be read).
pub fn power(dir: &Path) -> Power {
    let all = supplies(dir);
    let external = || all.iter().filter(|(k, _, _)| k != "Battery");
    if external().any(|(_, online, _)| online.as_deref() == Some("1")) {
        return Power::Mains;
    }
    let offline = external().any(|(_, online, _)| online.as_deref() == Some("0"));
    let discharging = all
        .iter()
        .any(|(k, _, status)| k == "Battery" && status.as_deref() == Some("Discharging"));
    if offline || discharging {
        Power::Battery
    } else {
        Power::Mains
    }
}

/// Whether the directory lists a battery.
pub fn has_battery(dir: &Path) -> bool {
    supplies(dir).iter().any(|(k, _, _)| k == "Battery")
}

/// The local time of day, in seconds since midnight (injected in tests).
pub trait LocalClock: Send {
    /// Seconds since local midnight.
    fn seconds_of_day(&self) -> u32;
}

/// The system's local time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLocalClock;

impl LocalClock for SystemLocalClock {
    fn seconds_of_day(&self) -> u32 {
        chrono::Local::now().time().num_seconds_from_midnight()
    }
}

/// The worker's gate: active hours and battery, read each time the loop asks.
pub struct PoliteGate {
    /// Hours when searching is allowed (None: always).
    pub hours: Option<ActiveHours>,
    /// Power-supply class directory to watch (None: battery ignored).
    pub power_supply: Option<PathBuf>,
    /// The time of day.
    pub clock: Box<dyn LocalClock>,
}

impl std::fmt::Debug for PoliteGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoliteGate")
            .field("hours", &self.hours)
            .field("power_supply", &self.power_supply)
            .finish_non_exhaustive()
    }
}

fn hm(d: Duration) -> String {
    let m = d.as_secs().div_ceil(60);
    format!("{}h{:02}", m / 60, m % 60)
}

impl Gate for PoliteGate {
    fn state(&mut self) -> GateState {
        if let Some(dir) = &self.power_supply
            && power(dir) == Power::Battery
        {
            return GateState::Pause("on battery".into());
        }
        match self
            .hours
            .as_ref()
            .map(|h| h.at(self.clock.seconds_of_day()))
        {
            None | Some(HoursState::Active { left: None }) => GateState::Run { available: None },
            Some(HoursState::Active { left }) => GateState::Run { available: left },
            Some(HoursState::Inactive { starts_in }) => GateState::Pause(format!(
                "outside the active hours {} (they start again in {})",
                self.hours
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                hm(starts_in)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hours(s: &str) -> ActiveHours {
        s.parse().unwrap()
    }

    fn at(h: u32, m: u32) -> u32 {
        h * 3600 + m * 60
    }

    fn active(left_min: u64) -> HoursState {
        HoursState::Active {
            left: Some(Duration::from_secs(left_min * 60)),
        }
    }

    fn inactive(in_min: u64) -> HoursState {
        HoursState::Inactive {
            starts_in: Duration::from_secs(in_min * 60),
        }
    }

    #[test]
    fn active_hours_over_the_day() {
        let night = hours("19:00-07:30");
        assert_eq!(night.at(at(18, 59)), inactive(1));
        assert_eq!(night.at(at(19, 0)), active(12 * 60 + 30));
        assert_eq!(night.at(at(23, 30)), active(8 * 60));
        assert_eq!(night.at(at(0, 0)), active(7 * 60 + 30));
        assert_eq!(night.at(at(7, 29)), active(1));
        assert_eq!(night.at(at(7, 30)), inactive(11 * 60 + 30));
        let split = hours("00:00-08:00, 12:00-13:00");
        assert_eq!(split.at(at(8, 0)), inactive(4 * 60));
        assert_eq!(split.at(at(12, 30)), active(30));
        assert_eq!(split.at(at(22, 0)), inactive(2 * 60));
        let evening = hours("20:00-24:00,00:00-02:00");
        assert_eq!(
            evening.at(at(23, 0)),
            active(3 * 60),
            "runs on past midnight"
        );
        assert_eq!(split.at(at(13, 0)), inactive(11 * 60));
        // Overlapping and touching ranges merge; a whole day has no end.
        assert_eq!(
            hours("09:00-12:00,11:00-14:00").at(at(10, 0)),
            active(4 * 60)
        );
        assert_eq!(
            hours("00:00-24:00").at(at(5, 0)),
            HoursState::Active { left: None }
        );
        assert_eq!(
            hours("06:00-18:00,18:00-06:00").at(at(5, 0)),
            HoursState::Active { left: None }
        );
        assert_eq!(night.to_string(), "19:00-07:30");
    }

    #[test]
    fn bad_hours_are_refused_with_the_expected_form() {
        for bad in [
            "",
            "19-07",
            "19:00",
            "25:00-07:00",
            "07:60-08:00",
            "08:00-08:00",
            "a:b-c:d",
            "19:00-07:00,",
        ] {
            let e = bad.parse::<ActiveHours>().unwrap_err();
            assert!(e.to_string().contains("HH:MM-HH:MM"), "{bad:?}: {e}");
        }
        assert!(
            "IDLE"
                .parse::<Priority>()
                .is_ok_and(|p| p == Priority::Idle)
        );
        assert!("nice".parse::<Priority>().is_err());
    }

    /// A power supply of a fake directory: its name, type and attribute files.
    type Supply<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

    /// A fake power-supply class directory.
    fn supplies(list: &[Supply<'_>]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, kind, attrs) in list {
            let p = d.path().join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("type"), format!("{kind}\n")).unwrap();
            for (k, v) in *attrs {
                std::fs::write(p.join(k), format!("{v}\n")).unwrap();
            }
        }
        d
    }

    #[test]
    fn the_battery_is_read_from_the_power_supply_class() {
        // A desktop: nothing listed, or no such directory.
        let none = supplies(&[]);
        assert_eq!(power(none.path()), Power::Mains);
        assert!(!has_battery(none.path()));
        assert_eq!(power(&none.path().join("missing")), Power::Mains);
        // A laptop on its charger, then unplugged.
        let plugged = supplies(&[
            ("AC", "Mains", &[("online", "1")]),
            ("BAT0", "Battery", &[("status", "Charging")]),
        ]);
        assert_eq!(power(plugged.path()), Power::Mains);
        assert!(has_battery(plugged.path()));
        let unplugged = supplies(&[
            ("AC", "Mains", &[("online", "0")]),
            ("BAT0", "Battery", &[("status", "Discharging")]),
        ]);
        assert_eq!(power(unplugged.path()), Power::Battery);
        // USB-C power delivery online, the mains port offline.
        let usb = supplies(&[
            ("AC", "Mains", &[("online", "0")]),
            ("ucsi-source-psy-1", "USB", &[("online", "1")]),
            ("BAT0", "Battery", &[("status", "Charging")]),
        ]);
        assert_eq!(power(usb.path()), Power::Mains);
        // No charger listed at all, the battery discharging (some tablets).
        let tablet = supplies(&[("BAT1", "Battery", &[("status", "Discharging")])]);
        assert_eq!(power(tablet.path()), Power::Battery);
        // A battery that is full or not charging is not running the machine.
        let full = supplies(&[("BAT1", "Battery", &[("status", "Full")])]);
        assert_eq!(power(full.path()), Power::Mains);
    }

    /// A clock the test sets (seconds since local midnight).
    #[derive(Debug, Clone, Default)]
    struct FixedClock(std::sync::Arc<std::sync::atomic::AtomicU32>);

    impl LocalClock for FixedClock {
        fn seconds_of_day(&self) -> u32 {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[test]
    fn the_gate_pauses_outside_the_hours_and_on_battery() {
        let dir = supplies(&[
            ("AC", "Mains", &[("online", "1")]),
            ("BAT0", "Battery", &[("status", "Charging")]),
        ]);
        let clock = FixedClock::default();
        let settings = PoliteSettings {
            active_hours: Some(hours("22:00-06:00")),
            pause_on_battery: true,
            power_supply: dir.path().to_path_buf(),
            ..PoliteSettings::volunteer()
        };
        assert!(settings.part_time());
        let mut gate = settings.gate().unwrap();
        gate.clock = Box::new(clock.clone());
        clock
            .0
            .store(at(23, 0), std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            gate.state(),
            GateState::Run {
                available: Some(Duration::from_secs(7 * 3600))
            }
        );
        clock.0.store(at(6, 0), std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            gate.state(),
            GateState::Pause(
                "outside the active hours 22:00-06:00 (they start again in 16h00)".into()
            )
        );
        // Unplugged inside the hours: paused for the battery.
        clock.0.store(at(1, 0), std::sync::atomic::Ordering::SeqCst);
        std::fs::write(dir.path().join("AC/online"), "0\n").unwrap();
        assert_eq!(gate.state(), GateState::Pause("on battery".into()));
        std::fs::write(dir.path().join("AC/online"), "1\n").unwrap();
        assert!(matches!(gate.state(), GateState::Run { .. }));
        // A desktop without active hours is always on and has no gate to ask.
        let desk = supplies(&[]);
        let always = PoliteSettings {
            power_supply: desk.path().to_path_buf(),
            pause_on_battery: false,
            ..PoliteSettings::volunteer()
        };
        assert!(!always.part_time());
        assert!(always.gate().is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn idle_priority_is_set_on_the_thread_that_asks_only() {
        use thread_priority::ThreadSchedulePolicy;
        use thread_priority::unix::{NormalThreadSchedulePolicy, thread_schedule_policy};
        let before = thread_schedule_policy().unwrap();
        let (idle, low) = std::thread::scope(|s| {
            let idle = s
                .spawn(|| {
                    Priority::Idle.apply_to_current_thread().unwrap();
                    thread_schedule_policy().unwrap()
                })
                .join()
                .unwrap();
            let low = s
                .spawn(|| {
                    Priority::Low.apply_to_current_thread().unwrap();
                    // Field 19 of the thread's stat line is its nice value.
                    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
                    let after = &stat[stat.rfind(')').unwrap() + 1..];
                    let nice: i32 = after.split_whitespace().nth(16).unwrap().parse().unwrap();
                    (thread_schedule_policy().unwrap(), nice)
                })
                .join()
                .unwrap();
            (idle, low)
        });
        assert_eq!(
            idle,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle)
        );
        assert_eq!(
            low.0,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other)
        );
        assert_eq!(low.1, 19, "nice 19");
        assert_eq!(
            thread_schedule_policy().unwrap(),
            before,
            "the caller's own is untouched"
        );
    }
}
