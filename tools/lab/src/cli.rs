//! The lab's arguments, parsed into what to measure; a test holds every
//! `cargo xtask lab ...` command the docs show to this grammar.

/// What one run of the lab does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Every section, full scale.
    Full,
    /// Every section, small, properties only.
    Quick,
    /// Sections 1 and 2 only.
    Allocators,
    Power,
    ColdStart,
    FirstInvocation,
    Concurrency,
    /// One function's own section, by its binary.
    Section(String),
}

const USAGE: &str = "usage: lab [--quick | allocators | power | cold-start | first-invocation | concurrency | section FUNCTION]";

/// The command `args` (without the program's name) ask for.
pub fn parse(args: &[&str]) -> Result<Command, String> {
    Ok(match args {
        [] => Command::Full,
        ["--quick"] => Command::Quick,
        ["allocators"] => Command::Allocators,
        ["power"] => Command::Power,
        ["cold-start"] => Command::ColdStart,
        ["first-invocation"] => Command::FirstInvocation,
        ["concurrency"] => Command::Concurrency,
        ["section", binary] if !binary.starts_with('-') => Command::Section((*binary).to_owned()),
        _ => return Err(USAGE.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use local_stack::workspace_root;
    use std::path::{Path, PathBuf};

    /// The arguments of every `cargo xtask lab` command in `text`, as
    /// written: the words after it up to a comment, a closing backtick, a
    /// bracket or the end of the line; a placeholder in capitals or angle
    /// brackets stands for a function.
    fn documented(text: &str) -> Vec<Vec<String>> {
        text.match_indices("cargo xtask lab")
            .map(|(at, found)| {
                let rest = &text[at + found.len()..];
                let end = rest
                    .find(['\n', '`', '#', '(', '[', ')', ';', ','])
                    .unwrap_or(rest.len());
                rest[..end]
                    .split_whitespace()
                    .map(|word| word.trim_end_matches(['.', ':']))
                    .map(|word| {
                        let placeholder = word.starts_with('<')
                            || (word.len() > 1 && word.chars().all(|c| c.is_ascii_uppercase()));
                        if placeholder { "example" } else { word }.to_owned()
                    })
                    .collect()
            })
            .collect()
    }

    /// The documents a user or contributor reads: the top-level ones and
    /// every README below, outside build folders.
    fn documents(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() && name != "target" && !name.starts_with('.') {
                documents(&path, found);
            } else if name.ends_with(".md") && (dir == workspace_root() || name == "README.md") {
                found.push(path);
            }
        }
    }

    #[test]
    fn every_documented_lab_command_parses() {
        let mut files = Vec::new();
        documents(&workspace_root(), &mut files);
        let mut wrong = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for args in documented(&text) {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if parse(&args).is_err() {
                    wrong.push(format!(
                        "{}: cargo xtask lab {}",
                        file.display(),
                        args.join(" ")
                    ));
                }
            }
        }
        assert!(files.len() > 5, "{files:?}");
        assert!(
            wrong.is_empty(),
            "commands the lab refuses:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn commands_are_read_from_the_docs_as_written() {
        let text = "run `cargo xtask lab section arrow-worker` again;\n\
            cargo xtask lab power   # only section 4\ncargo xtask lab section NAME\n\
            (`cargo xtask lab`) and cargo xtask lab bcrypt.";
        let found = documented(text);
        assert_eq!(
            found,
            [
                vec!["section", "arrow-worker"],
                vec!["power"],
                vec!["section", "example"],
                vec![],
                vec!["bcrypt"],
            ]
        );
        let refused: Vec<bool> = found
            .iter()
            .map(|args| parse(&args.iter().map(String::as_str).collect::<Vec<_>>()).is_err())
            .collect();
        assert_eq!(refused, [false, false, false, false, true]);
        assert_eq!(parse(&["section"]), Err(USAGE.to_owned()));
    }
}
