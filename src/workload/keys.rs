//! Reading one `[workloads.NAME]` table of a spec: typed look-ups of its
//! keys, the shared rules (positive amounts, durations, fixed work or fixed
//! time), and errors that name the full key (`workloads.NAME.KEY`).
//!
//! Each workload kind parses its own keys with a [`Keys`]; the spec module
//! turns a [`KeyError`] into its own error, adding the file's name.

/// A key of a workload table and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    /// Full key, such as `workloads.fast.period_us`.
    pub key: String,
    pub message: String,
}

/// The keys of one workload table.
pub struct Keys<'a> {
    base: String,
    table: &'a toml::Table,
    /// What the table describes, for errors ("a pi workload").
    what: String,
}

/// The longest duration a spec may ask for.
const MAX_SECONDS: f64 = 7.0 * 86400.0;

impl<'a> Keys<'a> {
    /// `name` is the table's name under `[workloads]`, `kind` the workload
    /// kind it was resolved to.
    pub fn new(name: &str, kind: &str, table: &'a toml::Table) -> Keys<'a> {
        Keys {
            base: format!("workloads.{name}"),
            table,
            what: format!("a {kind} workload"),
        }
    }

    /// The keys of `table`, the sub-table under `key` (such as a command
    /// workload's `figures.elapsed`); `what` names it in errors ("figure
    /// `elapsed`").
    pub fn nested(&self, key: &str, table: &'a toml::Table, what: impl Into<String>) -> Keys<'a> {
        Keys {
            base: self.key(key),
            table,
            what: what.into(),
        }
    }

    /// The value of `key`, if given, whatever its type.
    pub fn value(&self, key: &str) -> Option<&'a toml::Value> {
        self.table.get(key)
    }

    /// A table key, if given.
    pub fn table(&self, key: &str) -> Result<Option<&'a toml::Table>, KeyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(t)),
            Some(v) => Err(self.type_err(key, "a table", v)),
        }
    }

    /// An array of strings, if given; a non-string item is named by its
    /// position (1-based).
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, KeyError> {
        let items = match self.table.get(key) {
            None => return Ok(None),
            Some(toml::Value::Array(a)) => a,
            Some(v) => return Err(self.type_err(key, "an array of strings", v)),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                toml::Value::String(s) => Ok(s.clone()),
                v => Err(self.err(
                    key,
                    format!(
                        "item {} must be a string, got {} `{v}`",
                        i + 1,
                        v.type_str()
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// An array of integers, if given; a non-integer item is named by its
    /// position (1-based).
    pub fn ints(&self, key: &str) -> Result<Option<Vec<i64>>, KeyError> {
        let items = match self.table.get(key) {
            None => return Ok(None),
            Some(toml::Value::Array(a)) => a,
            Some(v) => return Err(self.type_err(key, "an array of integers", v)),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                toml::Value::Integer(n) => Ok(*n),
                v => Err(self.err(
                    key,
                    format!(
                        "item {} must be an integer, got {} `{v}`",
                        i + 1,
                        v.type_str()
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The full name of `key`.
    pub fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.base)
    }

    /// An error about `key`.
    pub fn err(&self, key: &str, message: impl Into<String>) -> KeyError {
        KeyError {
            key: self.key(key),
            message: message.into(),
        }
    }

    /// Refuse every key not in `allowed` (`kind` is always allowed).
    pub fn only(&self, allowed: &[&str]) -> Result<(), KeyError> {
        for k in self.table.keys() {
            if k != "kind" && !allowed.contains(&k.as_str()) {
                return Err(self.err(
                    k,
                    format!(
                        "not a parameter of {}; its parameters: {}",
                        self.what,
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn type_err(&self, key: &str, want: &str, v: &toml::Value) -> KeyError {
        self.err(key, format!("must be {want}, got {} `{v}`", v.type_str()))
    }

    /// An integer key, if given.
    pub fn int(&self, key: &str) -> Result<Option<i64>, KeyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) => Ok(Some(*i)),
            Some(v) => Err(self.type_err(key, "an integer", v)),
        }
    }

    /// A number key (an integer is accepted), if given.
    pub fn float(&self, key: &str) -> Result<Option<f64>, KeyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(f)) => Ok(Some(*f)),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(v) => Err(self.type_err(key, "a number", v)),
        }
    }

    /// A boolean key, if given.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, KeyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(self.type_err(key, "true or false", v)),
        }
    }

    /// A string key, if given.
    pub fn str(&self, key: &str) -> Result<Option<&'a str>, KeyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.type_err(key, "a string", v)),
        }
    }

    /// One of `allowed` (a string key), or `default` when absent.
    pub fn choice(
        &self,
        key: &str,
        allowed: &[&'static str],
        default: &'static str,
    ) -> Result<&'static str, KeyError> {
        match self.str(key)? {
            None => Ok(default),
            Some(s) => allowed.iter().copied().find(|a| *a == s).ok_or_else(|| {
                self.err(
                    key,
                    format!("unknown value \"{s}\"; allowed: {}", allowed.join(", ")),
                )
            }),
        }
    }

    /// A positive integer.
    pub fn positive(&self, key: &str, v: i64) -> Result<u64, KeyError> {
        if v <= 0 {
            return Err(self.err(key, format!("must be a positive integer, got {v}")));
        }
        Ok(v as u64)
    }

    /// A positive integer key, or `default` when absent.
    pub fn positive_or(&self, key: &str, default: u64) -> Result<u64, KeyError> {
        match self.int(key)? {
            Some(v) => self.positive(key, v),
            None => Ok(default),
        }
    }

    /// An integer key within `lo..=hi`, or `default` when absent; `what`
    /// says what the number means in the error.
    pub fn int_in(
        &self,
        key: &str,
        lo: i64,
        hi: i64,
        default: i64,
        what: &str,
    ) -> Result<i64, KeyError> {
        let v = self.int(key)?.unwrap_or(default);
        if !(lo..=hi).contains(&v) {
            return Err(self.err(key, format!("must be between {lo} and {hi}{what}, got {v}")));
        }
        Ok(v)
    }

    /// A duration in seconds, as nanoseconds.
    pub fn seconds(&self, key: &str, v: f64, allow_zero: bool) -> Result<u64, KeyError> {
        if !v.is_finite() || v < 0.0 || (!allow_zero && v == 0.0) {
            let what = if allow_zero {
                "zero or more"
            } else {
                "more than zero"
            };
            return Err(self.err(key, format!("must be {what} seconds, got {v}")));
        }
        if v > MAX_SECONDS {
            return Err(self.err(key, format!("{v} s is more than a week")));
        }
        Ok((v * 1e9).round() as u64)
    }

    /// `duration_s` as nanoseconds, if given.
    pub fn duration(&self) -> Result<Option<u64>, KeyError> {
        match self.float("duration_s")? {
            Some(d) => Ok(Some(self.seconds("duration_s", d, false)?)),
            None => Ok(None),
        }
    }

    /// How the workload stops: the amount under `amount_key` (fixed work),
    /// or `duration_s` (fixed time), never both; `default` work otherwise.
    pub fn stop(&self, amount_key: &str, default: u64) -> Result<super::Stop, KeyError> {
        use super::Stop;
        let duration = self.duration()?;
        match (self.int(amount_key)?, duration) {
            (Some(_), Some(_)) => Err(self.err(
                amount_key,
                format!(
                    "give either {amount_key} (fixed work) or duration_s (fixed time), not both"
                ),
            )),
            (None, Some(d)) => Ok(Stop::DurationNs(d)),
            (Some(a), None) => Ok(Stop::Work(self.positive(amount_key, a)?)),
            (None, None) => Ok(Stop::Work(default)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Stop;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn typed_lookups_name_the_full_key() {
        let t = table("a = 3\nb = 2.5\nc = true\nd = \"x\"\n");
        let k = Keys::new("w", "pi", &t);
        assert_eq!(k.int("a").unwrap(), Some(3));
        assert_eq!(k.float("a").unwrap(), Some(3.0));
        assert_eq!(k.float("b").unwrap(), Some(2.5));
        assert_eq!(k.bool("c").unwrap(), Some(true));
        assert_eq!(k.str("d").unwrap(), Some("x"));
        assert_eq!(k.int("zz").unwrap(), None);
        let e = k.int("d").unwrap_err();
        assert_eq!(e.key, "workloads.w.d");
        assert!(e.message.contains("must be an integer"), "{}", e.message);
        let e = k
            .positive_or("a", 1)
            .map(|_| ())
            .and(k.positive("a", 0).map(|_| ()));
        assert_eq!(e.unwrap_err().message, "must be a positive integer, got 0");
    }

    #[test]
    fn only_refuses_foreign_keys() {
        let t = table("kind = \"pi\"\nbytes = 5\n");
        let k = Keys::new("pi", "pi", &t);
        let e = k.only(&["iterations", "duration_s"]).unwrap_err();
        assert_eq!(e.key, "workloads.pi.bytes");
        assert_eq!(
            e.message,
            "not a parameter of a pi workload; its parameters: iterations, duration_s"
        );
        assert!(k.only(&["bytes"]).is_ok());
    }

    #[test]
    fn arrays_tables_and_nested_keys() {
        let t = table(
            "argv = [\"a\", 3]\nok = [0, 2]\nbad = [1, \"x\"]\ns = \"x\"\n[f.e]\nregex = 1\n",
        );
        let k = Keys::new("w", "command", &t);
        let e = k.strings("argv").unwrap_err();
        assert_eq!(e.key, "workloads.w.argv");
        assert_eq!(e.message, "item 2 must be a string, got integer `3`");
        assert_eq!(k.ints("ok").unwrap(), Some(vec![0, 2]));
        assert_eq!(
            k.ints("bad").unwrap_err().message,
            "item 2 must be an integer, got string `\"x\"`"
        );
        assert_eq!(
            k.strings("s").unwrap_err().message,
            "must be an array of strings, got string `\"x\"`"
        );
        assert_eq!(k.strings("none").unwrap(), None);
        let f = k.table("f").unwrap().unwrap();
        let figs = k.nested("f", f, "the figures");
        let e = figs.table("e").unwrap().unwrap();
        let fe = figs.nested("e", e, "figure `e`");
        assert_eq!(fe.int("regex").unwrap(), Some(1));
        let e = fe.only(&["json"]).unwrap_err();
        assert_eq!(e.key, "workloads.w.f.e.regex");
        assert_eq!(
            e.message,
            "not a parameter of figure `e`; its parameters: json"
        );
        assert!(
            k.table("s")
                .unwrap_err()
                .message
                .contains("must be a table")
        );
        assert!(k.value("s").is_some() && k.value("zz").is_none());
    }

    #[test]
    fn stop_is_work_or_duration_never_both() {
        let both = table("n = 3\nduration_s = 1\n");
        let k = Keys::new("w", "x", &both);
        assert!(k.stop("n", 7).unwrap_err().message.contains("not both"));
        let d = table("duration_s = 0.5\n");
        assert_eq!(
            Keys::new("w", "x", &d).stop("n", 7).unwrap(),
            Stop::DurationNs(500_000_000)
        );
        let none = table("");
        assert_eq!(
            Keys::new("w", "x", &none).stop("n", 7).unwrap(),
            Stop::Work(7)
        );
        let bad = table("duration_s = -1\n");
        let e = Keys::new("w", "x", &bad).stop("n", 7).unwrap_err();
        assert_eq!(e.key, "workloads.w.duration_s");
        assert_eq!(e.message, "must be more than zero seconds, got -1");
    }

    #[test]
    fn choices_and_ranges() {
        let t = table("t = \"eventfd\"\nq = 0\n");
        let k = Keys::new("w", "x", &t);
        assert_eq!(
            k.choice("t", &["pipe", "eventfd"], "pipe").unwrap(),
            "eventfd"
        );
        assert_eq!(k.choice("u", &["pipe"], "pipe").unwrap(), "pipe");
        let e = k.choice("t", &["pipe"], "pipe").unwrap_err();
        assert_eq!(e.message, "unknown value \"eventfd\"; allowed: pipe");
        let e = k.int_in("q", 1, 10, 5, " (a queue depth)").unwrap_err();
        assert_eq!(e.message, "must be between 1 and 10 (a queue depth), got 0");
        assert_eq!(k.int_in("r", 1, 10, 5, "").unwrap(), 5);
    }
}
