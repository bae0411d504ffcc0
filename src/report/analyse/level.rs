//! One machine level of a campaign as if it were the whole campaign: its
//! runs and their environments, the machine factor dropped, so that
//! `compare --machine A --vs-machine B` matches the conditions of two
//! levels by their other factors (the same statistics as between two
//! campaigns).

use crate::store::ReportData;

/// The runs of machine level `level` of `data` (processes kept beside
/// their runs), with their machine left out; the environments those runs
/// ran in, each with its count of them; the planned runs those of one
/// level (the matrix crosses every level with every condition). An error
/// names the campaign's levels when `level` has no run.
pub fn at_machine<P>(data: ReportData<P>, level: &str) -> anyhow::Result<ReportData<P>> {
    let ReportData {
        mut campaign,
        runs,
        processes,
        process_rows,
        environments,
        work_units,
    } = data;
    let mut levels: Vec<String> = Vec::new();
    for m in runs.iter().filter_map(|r| r.machine.clone()) {
        if !levels.contains(&m) {
            levels.push(m);
        }
    }
    if !levels.iter().any(|l| l == level) {
        anyhow::bail!(
            "campaign {} has no run of machine level \"{level}\" ({})",
            campaign.id,
            match levels.is_empty() {
                true => "it does not sweep matrix.machine".to_string(),
                false => format!("its levels: {}", levels.join(", ")),
            }
        );
    }
    let (runs, processes): (Vec<_>, Vec<_>) = runs
        .into_iter()
        .zip(processes)
        .filter(|(r, _)| r.machine.as_deref() == Some(level))
        .map(|(mut r, p)| {
            r.machine = None;
            (r, p)
        })
        .unzip();
    let environments = environments
        .into_iter()
        .filter_map(|mut e| {
            let n = runs.iter().filter(|r| r.environment_id == e.id).count();
            e.runs = n as i64;
            (n > 0).then_some(e)
        })
        .collect();
    let in_spec = super::groups::spec_order(&campaign.spec_json)
        .machines
        .len();
    campaign.planned_runs /= in_spec.max(levels.len()) as u64;
    Ok(ReportData {
        campaign,
        runs,
        processes,
        process_rows,
        environments,
        work_units,
    })
}
