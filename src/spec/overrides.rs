//! `--set KEY=VALUE`: change one key of a spec from the command line before
//! it is validated. KEY is a dotted path (`matrix.processes`,
//! `workloads.pi.iterations`); VALUE is a TOML value (`3`, `[2,4]`,
//! `"fifo"`), and a bare word is taken as a string (`order=sequential`).

/// Apply one `KEY=VALUE` override to a parsed TOML table.
pub fn apply(table: &mut toml::Table, assignment: &str) -> Result<(), String> {
    let (key, value) = assignment
        .split_once('=')
        .ok_or_else(|| format!("\"{assignment}\" is not KEY=VALUE"))?;
    let key = key.trim();
    let path: Vec<&str> = key.split('.').map(str::trim).collect();
    if path.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "\"{key}\" is not a dotted key such as matrix.processes"
        ));
    }
    let value = parse_value(value.trim());
    let mut cur = table;
    for (i, part) in path[..path.len() - 1].iter().enumerate() {
        let entry = cur
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(format!(
                    "\"{}\" is a value, not a table",
                    path[..=i].join(".")
                ));
            }
        };
    }
    cur.insert(path[path.len() - 1].to_string(), value);
    Ok(())
}

/// A TOML value, or the text itself as a string when it is not one.
fn parse_value(text: &str) -> toml::Value {
    let doc = format!("v = {text}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(text.into())),
        Err(_) => toml::Value::String(text.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_nested_keys_with_toml_values() {
        let mut t: toml::Table = "repetitions = 10\n[matrix]\nprocesses = [5]\n"
            .parse()
            .unwrap();
        apply(&mut t, "repetitions=3").unwrap();
        apply(&mut t, "matrix.processes=[2,4]").unwrap();
        apply(&mut t, "order=sequential").unwrap();
        apply(&mut t, "workloads.pi.iterations = 1000").unwrap();
        assert_eq!(t["repetitions"].as_integer(), Some(3));
        assert_eq!(t["matrix"]["processes"].as_array().unwrap().len(), 2);
        assert_eq!(t["order"].as_str(), Some("sequential"));
        assert_eq!(t["workloads"]["pi"]["iterations"].as_integer(), Some(1000));
    }

    #[test]
    fn rejects_malformed_assignments() {
        let mut t = toml::Table::new();
        assert!(
            apply(&mut t, "repetitions")
                .unwrap_err()
                .contains("KEY=VALUE")
        );
        assert!(apply(&mut t, "a..b=1").unwrap_err().contains("dotted key"));
        apply(&mut t, "x=1").unwrap();
        assert!(apply(&mut t, "x.y=1").unwrap_err().contains("not a table"));
    }
}
