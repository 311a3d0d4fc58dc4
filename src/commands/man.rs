//! `edc-sync man [SUBCOMMAND...] [--out-dir DIR]`: manual pages from the
//! same definitions as `--help`, so they cannot disagree with it, with the
//! sections a man page reader looks for: EXAMPLES (the table `--help` shows)
//! and EXIT STATUS (the codes scripts rely on).

use std::io::Write;
use std::path::Path;

use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;

use crate::cli::examples;
use edc_core::error::IoContext;
use edc_core::exit::Exit;
use edc_core::Error;

/// Prints one page, or writes every page into `out_dir` (created).
pub fn run(path: &[String], out_dir: Option<&Path>) -> Result<(), Error> {
    let mut root = crate::cli::command().disable_help_subcommand(true);
    root.build();
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(dir).io(|| format!("creating {}", dir.display()))?;
        return write_all(&root, "", dir)
            .map_err(|e| e.context(format!("writing man pages into {}", dir.display())));
    }
    let mut page = root;
    for name in path {
        let Some(sub) = page.find_subcommand(name).cloned() else {
            // A usage error, like any unknown subcommand: clap prints it, exit 2.
            crate::cli::command()
                .error(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("no subcommand {name:?} under {:?}", page.get_name()),
                )
                .exit();
        };
        page = sub;
    }
    std::io::stdout()
        .lock()
        .write_all(&render(page, &path.join(" ")).io(|| "rendering the man page".into())?)
        .io(|| "writing the man page".into())
}

/// `cmd`'s page and every visible subcommand's, as `edc-sync-sync.1` and so on.
fn write_all(cmd: &clap::Command, path: &str, dir: &Path) -> Result<(), Error> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_path = match path {
            "" => sub.get_name().to_string(),
            p => format!("{p} {}", sub.get_name()),
        };
        write_all(sub, &sub_path, dir)?;
    }
    let file = dir.join(Man::new(cmd.clone()).get_filename());
    let page = render(cmd.clone(), path).io(|| format!("rendering {}", file.display()))?;
    edc_core::no_follow::write(&file, page).io(|| format!("writing {}", file.display()))
}

/// clap_mangen's sections, then EXAMPLES and EXIT STATUS (in the order
/// man-pages(7) gives them), then what `--help` says after the options
/// when that is more than the examples and codes.
fn render(cmd: clap::Command, path: &str) -> std::io::Result<Vec<u8>> {
    let own_notes = cmd.get_after_long_help().is_some();
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subs = cmd.has_subcommands();
    let man = Man::new(cmd);
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    if has_args {
        man.render_options_section(&mut buf)?;
    }
    if has_subs {
        man.render_subcommands_section(&mut buf)?;
    }
    if own_notes {
        man.render_extra_section(&mut buf)?;
    }
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for d in Exit::ALL {
        roff.control("TP", []);
        roff.text([roman(format!("{} ({})", d.code, d.label))]);
        roff.text([roman(format!("{}. What to do: {}.", d.meaning, d.what_to_do))]);
    }
    roff.control("SH", ["EXAMPLES"]);
    for e in examples::of(path) {
        roff.text([roman(e.what)]);
        roff.control("PP", []);
        roff.control("RS", ["4"]);
        roff.control("EX", []);
        roff.text([roman(e.line)]);
        roff.control("EE", []);
        roff.control("RE", []);
        roff.control("PP", []);
    }
    roff.to_writer(&mut buf)?;
    man.render_version_section(&mut buf)?;
    Ok(buf)
}
