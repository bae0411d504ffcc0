//! Exports of stored runs for other tools: CSV (one row per process per run)
//! and JSON (the same rows as an array of objects).

use anyhow::Result;
use std::io::Write;

use crate::store::ExportRow;

/// The CSV columns, in order. The first 21 are the ones the documentation
/// promises; the rest add detail.
pub const COLUMNS: &[&str] = &[
    "campaign",
    "run",
    "policy",
    "workload",
    "processes",
    "priority_mode",
    "cpus",
    "rep",
    "process_index",
    "nice",
    "rt_priority",
    "wall_ns",
    "utime_us",
    "stime_us",
    "nvcsw",
    "nivcsw",
    "run_ns",
    "wait_ns",
    "timeslices",
    "work",
    "status",
    "campaign_name",
    "run_key",
    "seq",
    "workload_kind",
    "scale",
    "reason",
    "makespan_ns",
    "cpu_util",
    "pid",
    "start_ns",
    "end_ns",
    "minflt",
    "majflt",
    "maxrss_kb",
    "work_unit",
    "exit",
    "role",
    "rt_runtime_us",
];

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_default()
}

fn fields(r: &ExportRow) -> Vec<String> {
    vec![
        r.campaign.to_string(),
        r.run.to_string(),
        r.policy.clone(),
        r.workload.clone(),
        r.processes.to_string(),
        r.priority_mode.clone(),
        r.cpus.clone(),
        r.rep.to_string(),
        opt(&r.process_index),
        opt(&r.nice),
        opt(&r.rt_priority),
        opt(&r.wall_ns),
        opt(&r.utime_us),
        opt(&r.stime_us),
        opt(&r.nvcsw),
        opt(&r.nivcsw),
        opt(&r.run_ns),
        opt(&r.wait_ns),
        opt(&r.timeslices),
        opt(&r.work),
        r.status.clone(),
        r.campaign_name.clone(),
        r.run_key.clone(),
        r.seq.to_string(),
        r.workload_kind.clone(),
        r.scale.to_string(),
        r.reason.clone(),
        opt(&r.makespan_ns),
        opt(&r.cpu_util),
        opt(&r.pid),
        opt(&r.start_ns),
        opt(&r.end_ns),
        opt(&r.minflt),
        opt(&r.majflt),
        opt(&r.maxrss_kb),
        opt(&r.work_unit),
        opt(&r.exit),
        opt(&r.role),
        opt(&r.rt_runtime_us),
    ]
}

/// RFC 4180 quoting: fields with a comma, quote or line break are quoted.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

pub fn write_csv(rows: &[ExportRow], out: &mut dyn Write) -> Result<()> {
    writeln!(out, "{}", COLUMNS.join(","))?;
    for r in rows {
        let line: Vec<String> = fields(r).iter().map(|f| quote(f)).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}

pub fn write_json(rows: &[ExportRow], out: &mut dyn Write) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, rows)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_follows_rfc4180() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn header_and_fields_line_up() {
        let row = ExportRow {
            campaign: 1,
            campaign_name: "c".into(),
            run: 2,
            run_key: "k".into(),
            seq: 0,
            policy: "fifo".into(),
            workload: "pi".into(),
            workload_kind: "pi".into(),
            processes: 2,
            priority_mode: "uniform".into(),
            cpus: "0".into(),
            rep: 1,
            scale: 0.5,
            status: "ok".into(),
            reason: String::new(),
            makespan_ns: Some(10),
            cpu_util: Some(0.5),
            process_index: Some(0),
            pid: Some(42),
            nice: None,
            rt_priority: Some(50),
            start_ns: Some(1),
            end_ns: Some(9),
            wall_ns: Some(9),
            utime_us: Some(3),
            stime_us: Some(0),
            nvcsw: Some(1),
            nivcsw: Some(0),
            minflt: Some(5),
            majflt: Some(0),
            maxrss_kb: Some(100),
            run_ns: Some(3000),
            wait_ns: Some(10),
            timeslices: Some(1),
            work: Some(1000),
            work_unit: Some("iterations".into()),
            exit: Some("exit code 0".into()),
            rt_runtime_us: None,
            role: Some("worker".into()),
        };
        assert_eq!(fields(&row).len(), COLUMNS.len());
        let mut out = Vec::new();
        write_csv(&[row], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(
            "campaign,run,policy,workload,processes,priority_mode,cpus,rep,process_index"
        ));
        let cells: Vec<&str> = lines[1].split(',').collect();
        let col = |name: &str| cells[COLUMNS.iter().position(|c| *c == name).unwrap()];
        assert_eq!(col("rt_priority"), "50");
        assert_eq!(col("nice"), "");
        assert_eq!(col("work"), "1000");
        assert_eq!(col("status"), "ok");
    }
}
