//! `edc-sync completions SHELL`: the shell's completion script, from the
//! same definitions as `--help`.

use edc_core::error::IoContext;
use edc_core::Error;
use std::io::Write;

use clap_complete::Shell;

const BIN: &str = "edc-sync";

/// The name bash's script is generated under: clap_complete's bash script
/// spells the state of a hyphenated binary two ways (`edc__sync__subcmd__sync`
/// in its dispatch loop, `edc__subcmd__sync__subcmd__sync` in the arms that
/// list options), so nothing past the subcommand completed (clap-rs/clap
/// issue 6421, open). Generated for a name without a hyphen, the two agree;
/// only the `complete` line must still name the real command.
const BASH_NAME: &str = "edc_sync";

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let name = if shell == Shell::Bash { BASH_NAME } else { BIN };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut crate::cli::command(), name, &mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    if shell != Shell::Bash {
        return text;
    }
    text.lines()
        .map(|line| match line.trim_start().starts_with("complete ") {
            true => line.replace(&format!(" {BASH_NAME}"), &format!(" {BIN}")),
            false => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Prints [`script`]; rendered into memory first, since clap_complete
/// panics on a write error and `| head` must end quietly.
pub fn run(shell: Shell) -> Result<(), Error> {
    std::io::stdout()
        .lock()
        .write_all(script(shell).as_bytes())
        .io(|| "writing the completions".into())
}
