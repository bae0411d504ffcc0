//! The command line's names for the domain's enums: clap parses `--metric`,
//! `--expect`, `--format` and `--by` straight into [`Metric`],
//! [`EnvField`], the formats and [`RunFactor`]. The names are the domain's
//! own (`Metric::name`, `EnvField::name`); this file only tells clap about
//! them, so that clap stays in `cli/` and no enum is copied.

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::compare::EnvField;
use crate::report::Metric;
use crate::store::RunFactor;

impl ValueEnum for Metric {
    fn value_variants<'a>() -> &'a [Self] {
        &Metric::CHOOSABLE
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.description()))
    }
}

impl ValueEnum for EnvField {
    fn value_variants<'a>() -> &'a [Self] {
        &EnvField::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.description()))
    }
}

impl ValueEnum for RunFactor {
    fn value_variants<'a>() -> &'a [Self] {
        &RunFactor::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            RunFactor::Host => "The machine (hostname; with its host id when two share a name)",
            RunFactor::Kernel => "The kernel release (`uname -r`)",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for crate::report::Format {
    fn value_variants<'a>() -> &'a [Self] {
        &crate::report::Format::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        use crate::report::Format;
        let help = match self {
            Format::Html => "One self-contained HTML file with charts (no network, no scripts)",
            Format::Md => "Markdown: findings and tables, for the terminal or a lab report",
            Format::Json => "JSON: every statistic, for scripts",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for crate::export::Format {
    fn value_variants<'a>() -> &'a [Self] {
        &crate::export::Format::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        use crate::export::Format;
        let value = PossibleValue::new(self.name());
        Some(match self {
            Format::Csv | Format::Json => value,
            Format::Parquet => {
                value.help("Typed columns, for DuckDB, Polars, pandas, Spark (needs -o)")
            }
        })
    }
}

impl ValueEnum for crate::trace::export::Format {
    fn value_variants<'a>() -> &'a [Self] {
        &crate::trace::export::Format::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        use crate::trace::export::Format;
        Some(match self {
            Format::Perfetto => PossibleValue::new("perfetto").help("Perfetto's protobuf trace"),
            Format::Json => PossibleValue::new("json").help("Chrome trace-event JSON"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value clap offers parses back to the value it names, and the
    /// names are the domain's.
    fn round_trips<T: ValueEnum + PartialEq + std::fmt::Debug>(name: fn(&T) -> String) {
        for v in T::value_variants() {
            let pv = v.to_possible_value().unwrap();
            assert_eq!(pv.get_name(), name(v));
            assert_eq!(T::from_str(pv.get_name(), false).as_ref(), Ok(v));
        }
    }

    #[test]
    fn clap_names_are_the_domain_names() {
        round_trips::<Metric>(|m| m.name().to_string());
        round_trips::<EnvField>(|f| f.name().to_string());
        round_trips::<RunFactor>(|f| f.name().to_string());
        round_trips::<crate::report::Format>(|f| f.name().to_string());
        round_trips::<crate::export::Format>(|f| f.name().to_string());
        round_trips::<crate::trace::export::Format>(|f| format!("{f:?}").to_ascii_lowercase());
    }

    #[test]
    fn every_value_has_help() {
        fn all_helped<T: ValueEnum>() -> bool {
            T::value_variants()
                .iter()
                .all(|v| v.to_possible_value().unwrap().get_help().is_some())
        }
        assert!(all_helped::<Metric>());
        assert!(all_helped::<EnvField>());
        assert!(all_helped::<RunFactor>());
        assert!(all_helped::<crate::report::Format>());
        assert!(all_helped::<crate::trace::export::Format>());
    }
}
