//! The library put together: every function registered, every key set
//! named, every Lua name defined.

use std::collections::BTreeSet;

use super::*;

#[test]
fn every_function_is_registered_under_its_versioned_name() {
    for spec in FUNCTIONS {
        let registration = format!("'{}_' .. VERSION", spec.stem);
        assert!(
            spec.file.contains(&registration),
            "{} is not registered as {registration}",
            spec.stem
        );
    }
    assert!(
        LIBRARY
            .source
            .starts_with(&format!("#!lua name={}\n", LIBRARY.name()))
    );
}

#[test]
fn every_function_is_registered_with_the_flags_of_its_access() {
    for spec in FUNCTIONS {
        let flags = match spec.access {
            Access::Reads => Some("no-writes"),
            Access::Drains => Some("allow-oom"),
            Access::Writes => None,
        };
        let registration = match flags {
            Some(flag) => format!(
                "function_name = '{}_' .. VERSION,\n  flags = {{'{flag}'}},",
                spec.stem
            ),
            None => format!("redis.register_function('{}_' .. VERSION,", spec.stem),
        };
        assert!(
            spec.file.contains(&registration),
            "{} is not registered as {registration}",
            spec.stem
        );
    }
}

#[test]
fn every_function_names_its_sets_and_keys_in_its_header() {
    // The header's `-- KEYS:` line names the sets of keys, in capitals,
    // then the other keys, as the row does.
    for spec in FUNCTIONS {
        // The list may go on over lines that start with `--   `.
        let mut lines = spec.file.lines();
        let mut text = lines
            .find_map(|line| line.strip_prefix("-- KEYS: "))
            .unwrap_or_default()
            .to_owned();
        for line in lines {
            match line.strip_prefix("--   ") {
                Some(more) if text.ends_with(',') => text = format!("{text} {more}"),
                _ => break,
            }
        }
        let listed: Vec<&str> = text.split(", ").filter(|key| !key.is_empty()).collect();
        let named: Vec<&str> = (spec.sets.iter().map(|set| set.name()))
            .chain(spec.keys.iter().map(|key| key.name()))
            .collect();
        assert_eq!(listed, named, "{}", spec.stem);
    }
}

#[test]
fn a_key_named_by_a_row_is_not_in_its_sets() {
    for spec in FUNCTIONS {
        for key in spec.keys {
            assert!(
                !spec.sets.iter().any(|set| key.is_in(*set)),
                "{}: {} is in one of its sets already",
                spec.stem,
                key.name()
            );
        }
    }
}

#[test]
fn every_function_names_its_keys_from_the_table() {
    for spec in FUNCTIONS.iter().filter(|spec| !spec.taken().is_empty()) {
        // A function sharing another's file shares its keys.
        let owner = FUNCTIONS
            .iter()
            .find(|other| other.file == spec.file)
            .unwrap_or(spec);
        assert_eq!(owner.taken(), spec.taken(), "{}", spec.stem);
        let call = format!("queue_of('{}', keys, argv)", owner.stem);
        assert!(
            spec.file.contains(&call),
            "{} does not build its keys with {call}",
            spec.stem
        );
    }
}

/// The names the library's code reads that it never defines, as text:
/// comments and strings left out, a name after `.` or `:` being a
/// field. Lua looks such a name up as a global at run time, and Redis
/// fails the call then: a helper renamed in one place is only found
/// when a function that uses it runs. (Where a local is defined does
/// not count: a name defined anywhere passes.)
fn undefined_names(code: &str) -> BTreeSet<String> {
    const LUA: &[&str] = &[
        "and",
        "break",
        "do",
        "else",
        "elseif",
        "end",
        "false",
        "for",
        "function",
        "if",
        "in",
        "local",
        "nil",
        "not",
        "or",
        "repeat",
        "return",
        "then",
        "true",
        "until",
        "while",
        "redis",
        "string",
        "table",
        "math",
        "tonumber",
        "tostring",
        "unpack",
        "pairs",
        "ipairs",
        "type",
        "error",
        "select",
        "next",
        "assert",
        "pcall",
        "cjson",
        "bit",
        "setmetatable",
        "getmetatable",
        "rawget",
        "rawset",
        "struct",
        "cmsgpack",
    ];
    let mut text = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("--") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
        } else if c == '\'' || c == '"' {
            let mut chars = rest.char_indices().skip(1);
            let mut end = rest.len();
            while let Some((i, d)) = chars.next() {
                if d == '\\' {
                    chars.next();
                } else if d == c {
                    end = i + 1;
                    break;
                }
            }
            text.push_str("''");
            rest = &rest[end..];
        } else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    let words = |text: &str| -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.push((start, text[start..i].to_owned()));
            } else {
                i += 1;
            }
        }
        out
    };
    let words = words(&text);
    let before = |at: usize| text[..at].trim_end().chars().last();
    let mut defined: BTreeSet<String> = LUA.iter().map(|w| (*w).to_owned()).collect();
    // Locals, functions, parameters, loop variables and table keys
    // written `name =` inside a constructor are defined by where they
    // stand: after `local`, `function`, `for`, in a parameter list, or
    // before `=` (assignment or field).
    for (n, (at, word)) in words.iter().enumerate() {
        let next = text[at + word.len()..].trim_start();
        let assigned = next.starts_with('=') && !next.starts_with("==");
        let previous = n.checked_sub(1).map(|p| words[p].1.as_str());
        if assigned || previous == Some("function") {
            defined.insert(word.clone());
        }
        // `local a, b` and `for k, v`: the names listed after it.
        if word == "local" || word == "for" {
            let mut listed = words[n + 1..].iter().peekable();
            while let Some((at, name)) = listed.next() {
                defined.insert(name.clone());
                let comma = listed
                    .peek()
                    .is_some_and(|(next_at, _)| text[at + name.len()..*next_at].trim() == ",");
                if !comma {
                    break;
                }
            }
        }
    }
    // Parameters: the names in the parentheses after `function`.
    for (at, _) in text.match_indices("function") {
        let Some(open) = text[at..].find('(') else {
            continue;
        };
        let Some(close) = text[at + open..].find(')') else {
            continue;
        };
        for (_, word) in words_in(&text[at + open..at + open + close]) {
            defined.insert(word);
        }
    }
    fn words_in(text: &str) -> Vec<(usize, String)> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
            .map(|w| (0, w.to_owned()))
            .collect()
    }
    words
        .into_iter()
        .filter(|(at, word)| {
            !word.starts_with(|c: char| c.is_ascii_digit())
                && !matches!(before(*at), Some('.' | ':'))
                && !defined.contains(word)
        })
        .map(|(_, word)| word)
        .collect()
}

#[test]
fn every_name_the_library_reads_is_defined_in_it() {
    // The first line names the library for Redis.
    let (_, code) = LIBRARY.source.split_once('\n').unwrap_or_default();
    assert_eq!(undefined_names(code), BTreeSet::new());
}

#[test]
fn a_name_read_but_never_defined_is_found() {
    let code = "local function kept(x) return x end\n\
                local a, b = kept(1), 'gone(' -- renamed(\n\
                for k, v in pairs(a) do b = v end\n\
                return a.field, gone_helper(a, b)";
    assert_eq!(
        undefined_names(code),
        BTreeSet::from(["gone_helper".to_owned()])
    );
}
