//! Kernel configurations as text: a parsed `.config` ([`KernelConfig`]),
//! the options a fragment asks for ([`Want`]), and which of them a
//! configuration lacks ([`unmet`]). Nothing here reads files.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed `.config`: option name (without `CONFIG_`) to its value as
/// written (`y`, `m`, `64`, `"text"`). Options "is not set" are absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelConfig {
    options: BTreeMap<String, String>,
    /// From the header: "6.12.117" of "# Linux/x86 6.12.117 Kernel Configuration".
    release: Option<String>,
}

impl KernelConfig {
    /// Parse a `.config`. Lines that are neither `CONFIG_X=v`, a comment nor
    /// blank are an error naming the line.
    pub fn parse(text: &str) -> Result<KernelConfig, String> {
        let mut config = KernelConfig::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if let Some(rest) = line.strip_prefix("# Linux/") {
                // "# Linux/x86 6.12.117 Kernel Configuration"
                let mut words = rest.split_whitespace();
                if let (Some(_arch), Some(release)) = (words.next(), words.next()) {
                    config.release.get_or_insert_with(|| release.to_string());
                }
                continue;
            }
            if let Some((name, value)) = assignment(i, line)? {
                config.options.insert(name.to_string(), value.to_string());
            }
        }
        if config.options.is_empty() {
            return Err("no CONFIG_ option in it".to_string());
        }
        Ok(config)
    }

    /// The value of an option, named with or without `CONFIG_`; `None` when
    /// it is not set.
    pub fn get(&self, opt: &str) -> Option<&str> {
        let name = opt.strip_prefix("CONFIG_").unwrap_or(opt);
        self.options.get(name).map(String::as_str)
    }

    /// `CONFIG_NR_CPUS`: the most CPUs this kernel brings up.
    pub fn nr_cpus(&self) -> Option<u32> {
        self.get("NR_CPUS")?.parse().ok()
    }

    /// The kernel release of the header, e.g. "6.12.117".
    pub fn release(&self) -> Option<&str> {
        self.release.as_deref()
    }

    /// How many options are set.
    pub fn len(&self) -> usize {
        self.options.len()
    }

    pub fn is_empty(&self) -> bool {
        self.options.is_empty()
    }
}

/// One option a fragment asks for: set to a value, or not set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    /// Without `CONFIG_`.
    pub name: String,
    /// `None`: "is not set".
    pub value: Option<String>,
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "CONFIG_{}={v}", self.name),
            None => write!(f, "# CONFIG_{} is not set", self.name),
        }
    }
}

/// The options of a fragment (`CONFIG_X=v` and `# CONFIG_X is not set`
/// lines; other comments and blank lines are skipped).
pub fn parse_fragment(text: &str) -> Result<Vec<Want>, String> {
    let mut wants = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(name) = line
            .strip_prefix("# CONFIG_")
            .and_then(|rest| rest.strip_suffix(" is not set"))
        {
            wants.push(Want {
                name: name.to_string(),
                value: None,
            });
            continue;
        }
        let Some((name, value)) = assignment(i, line)? else {
            continue;
        };
        wants.push(Want {
            name: name.to_string(),
            value: Some(value.to_string()),
        });
    }
    Ok(wants)
}

/// Line `i` (0-based) of a configuration or fragment: `CONFIG_X=v` as
/// (X, v), None for a comment or a blank line, an error naming the line
/// for anything else.
fn assignment(i: usize, line: &str) -> Result<Option<(&str, &str)>, String> {
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    line.strip_prefix("CONFIG_")
        .and_then(|rest| rest.split_once('='))
        .map(Some)
        .ok_or_else(|| format!("line {}: {line:?} is not CONFIG_NAME=value", i + 1))
}

/// Whether `config` has what `want` asks for.
pub fn meets(config: &KernelConfig, want: &Want) -> bool {
    match (&want.value, config.get(&want.name)) {
        (Some(v), Some(have)) => v == have,
        (Some(_), None) => false,
        (None, have) => have.is_none_or(|h| h == "n"),
    }
}

/// The wants `config` does not meet, each with what the config has instead
/// ("CONFIG_X=y (not set)", "CONFIG_X=y (is m)", "# CONFIG_X is not set (is y)").
pub fn unmet(config: &KernelConfig, wants: &[Want]) -> Vec<String> {
    wants
        .iter()
        .filter(|w| !meets(config, w))
        .map(|w| match config.get(&w.name) {
            Some(have) => format!("{w} (is {have})"),
            None => format!("{w} (not set)"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "#\n# Automatically generated file; DO NOT EDIT.\n\
                          # Linux/x86 6.12.117 Kernel Configuration\n#\n\
                          CONFIG_CC_VERSION_TEXT=\"gcc (Debian 12.2.0-14) 12.2.0\"\n\
                          CONFIG_64BIT=y\nCONFIG_NR_CPUS=64\nCONFIG_VIRTIO_CONSOLE=m\n\
                          # CONFIG_RT_GROUP_SCHED is not set\n";

    #[test]
    fn a_config_is_parsed_with_its_release_and_values() {
        let c = KernelConfig::parse(CONFIG).unwrap();
        assert_eq!(c.release(), Some("6.12.117"));
        assert_eq!(c.get("64BIT"), Some("y"));
        assert_eq!(c.get("CONFIG_64BIT"), Some("y"));
        assert_eq!(c.get("RT_GROUP_SCHED"), None);
        assert_eq!(c.nr_cpus(), Some(64));
        assert_eq!(
            c.get("CC_VERSION_TEXT"),
            Some("\"gcc (Debian 12.2.0-14) 12.2.0\"")
        );
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn a_line_that_is_not_an_option_is_an_error_naming_it() {
        let e = KernelConfig::parse("CONFIG_A=y\nhello\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("hello"), "{e}");
        assert!(KernelConfig::parse("# only comments\n").is_err());
    }

    #[test]
    fn unmet_wants_are_named_with_what_the_config_has() {
        let c = KernelConfig::parse(CONFIG).unwrap();
        let wants = parse_fragment(
            "# a comment\nCONFIG_64BIT=y\nCONFIG_VIRTIO_CONSOLE=y\nCONFIG_IO_URING=y\n\
             # CONFIG_RT_GROUP_SCHED is not set\n# CONFIG_64BIT is not set\n",
        )
        .unwrap();
        assert_eq!(wants.len(), 5);
        assert_eq!(
            unmet(&c, &wants),
            vec![
                "CONFIG_VIRTIO_CONSOLE=y (is m)".to_string(),
                "CONFIG_IO_URING=y (not set)".to_string(),
                "# CONFIG_64BIT is not set (is y)".to_string(),
            ]
        );
    }
}
