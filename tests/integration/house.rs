//! The floor plan of docs/architecture.md, kept true by the suite.
//!
//! The crate graph is the compiler's business once it is declared: these
//! tests check that the declaration (`cargo tree`) is the one the document
//! draws, that no two files of a crate import each other in a circle, nor
//! two modules at any depth (a circle through three folders is a circle
//! even when no two of their files meet), and that files are sized by
//! their concept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The workspace's own crates and the workspace crates each depends on
/// (normal dependencies), exactly as docs/architecture.md draws them.
const FLOOR_PLAN: &[(&str, &[&str])] = &[
    ("quota-pacer", &[]),
    ("edc-json-lexer", &[]),
    ("edc-core", &["edc-json-lexer", "quota-pacer"]),
    ("edc-sim", &[]),
    ("edc-testkit", &[]),
    (
        "edc-qualify",
        &["edc-core", "edc-sim", "edc-testkit", "quota-pacer"],
    ),
    ("edc-sync", &["edc-core", "edc-qualify", "edc-sim"]),
    (
        "edc-sync-bench",
        &["edc-core", "edc-qualify", "edc-sim", "edc-testkit", "quota-pacer"],
    ),
];

/// `cargo tree`, as docs/architecture.md tells the reader to run it, prints
/// the floor plan the document draws.
#[test]
fn the_crate_graph_is_the_floor_plan() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--workspace",
            "--depth",
            "1",
            "-e",
            "normal",
            "--prefix",
            "depth",
            "--offline",
        ])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ours: BTreeSet<&str> = FLOOR_PLAN.iter().map(|(name, _)| *name).collect();
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.len() > 1)
    {
        let name = line[1..]
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        match &line[..1] {
            "0" => {
                found.entry(name.clone()).or_default();
                current = name;
            }
            "1" if ours.contains(name.as_str()) => {
                found.entry(current.clone()).or_default().insert(name);
            }
            _ => {}
        }
    }
    let plan: BTreeMap<String, BTreeSet<String>> = FLOOR_PLAN
        .iter()
        .map(|(name, deps)| (name.to_string(), deps.iter().map(|d| d.to_string()).collect()))
        .collect();
    assert_eq!(
        found, plan,
        "the workspace's crate graph differs from docs/architecture.md"
    );
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/architecture.md")).unwrap();
    assert!(doc.contains("`cargo tree --workspace --depth 1 -e normal`"));
    for (name, deps) in FLOOR_PLAN {
        let line = format!("`{name}` -> {}", arrows(deps));
        assert!(doc.contains(&line), "docs/architecture.md should say: {line}");
    }
}

fn arrows(deps: &[&str]) -> String {
    if deps.is_empty() {
        "(nothing of ours)".into()
    } else {
        deps.iter()
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The source directory of every crate of the workspace.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(ROOT);
    let mut dirs = vec![root.join("src")];
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        dirs.push(e.path().join("src"));
    }
    dirs.sort();
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file (`a/b.rs` and `a/b/mod.rs` are `[a, b]`;
/// `lib.rs` and `main.rs` the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// A file's text up to its inline test module, comments dropped: paths
/// inside `mod tests { ... }` are relative to that inline module.
fn code_of(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names that starts with `crate`, `super` or `self`,
/// with `use` trees expanded (`crate::a::{b, c::d}` gives two paths).
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|p| rest.starts_with(p));
        let boundary =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        if starts && boundary {
            let len = tree_len(rest);
            expand(&rest[..len], &mut Vec::new(), &mut out);
            i += len.max(1);
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// The length of a path or use tree at the start of `s`.
fn tree_len(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            c if c.is_alphanumeric() || c == '_' || c == ':' || c == '*' => {}
            ',' | ' ' | '\n' if depth > 0 => {}
            _ if depth > 0 => {}
            _ => return i,
        }
    }
    s.len()
}

fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(brace) = tree.find('{') {
        let head: Vec<String> = tree[..brace]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let inner = &tree[brace + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        let mut items = Vec::new();
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(&inner[start..]);
        let n = prefix.len();
        prefix.extend(head);
        for item in items.into_iter().filter(|s| !s.trim().is_empty()) {
            expand(item, prefix, out);
        }
        prefix.truncate(n);
    } else {
        let mut path = prefix.clone();
        path.extend(
            tree.split("::")
                .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
                .filter(|s| !s.is_empty() && s != "self"),
        );
        out.push(path);
    }
}

/// One crate's files and the names each module file re-exports from a
/// child (`pub use child::{A, B}`), to follow a path to where it lives.
struct Crate {
    files: BTreeMap<Vec<String>, PathBuf>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, String>>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut all = Vec::new();
        rust_files(src, &mut all);
        let mut files = BTreeMap::new();
        let mut reexports = BTreeMap::new();
        for f in all {
            let module = module_of(src, &f);
            let code = code_of(&std::fs::read_to_string(&f).unwrap());
            let mut names = BTreeMap::new();
            for stmt in code.split(';') {
                let Some(tree) = stmt.trim().strip_prefix("pub use ") else {
                    continue;
                };
                let tree = tree.trim();
                if tree.starts_with("crate::") || tree.starts_with("super::") {
                    continue;
                }
                let child = tree
                    .trim_start_matches("self::")
                    .split("::")
                    .next()
                    .unwrap_or("")
                    .to_string();
                for path in paths_in(&format!("self::{}", tree.trim_start_matches("self::"))) {
                    if let Some(name) = path.last() {
                        let name = name.rsplit(" as ").next().unwrap_or(name).to_string();
                        names.insert(name, child.clone());
                    }
                }
            }
            reexports.insert(module.clone(), names);
            files.insert(module, f);
        }
        Crate { files, reexports }
    }

    /// Which file uses which: every path a file names, resolved to the
    /// file that defines it. A module root re-exporting its children
    /// (`pub use child::X`) is a door, not a use, and is not counted.
    fn edges(&self) -> BTreeMap<&PathBuf, BTreeSet<&PathBuf>> {
        let mut edges: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> = BTreeMap::new();
        for (module, file) in &self.files {
            let text = std::fs::read_to_string(file).unwrap();
            let code: String = code_of(&text)
                .split(';')
                .filter(|s| !s.trim().starts_with("pub use "))
                .collect::<Vec<_>>()
                .join(";");
            for path in paths_in(&code) {
                if let Some(target) = self.resolve(module, &path) {
                    if target != file {
                        edges.entry(file).or_default().insert(target);
                    }
                }
            }
        }
        edges
    }

    /// The file that defines what `path`, written in a file of module
    /// `from`, names (`super` from `a/b.rs` is `a`, as from `a/b/mod.rs`).
    fn resolve(&self, from: &[String], path: &[String]) -> Option<&PathBuf> {
        let mut module: Vec<String> = from.to_vec();
        let mut rest = path;
        // `self` of a non-root file is that file's module; `super` goes up.
        match rest.first().map(String::as_str) {
            Some("crate") => {
                module.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            _ => {}
        }
        while rest.first().map(String::as_str) == Some("super") {
            module.pop();
            rest = &rest[1..];
        }
        while let Some(first) = rest.first() {
            let mut child = module.clone();
            child.push(first.clone());
            if self.files.contains_key(&child) {
                module = child;
                rest = &rest[1..];
                continue;
            }
            match self.reexports.get(&module).and_then(|r| r.get(first)) {
                Some(inner) => {
                    let mut child = module.clone();
                    child.push(inner.clone());
                    if !self.files.contains_key(&child) {
                        break;
                    }
                    module = child;
                }
                None => break,
            }
        }
        self.files.get(&module)
    }
}

/// No two files of one crate use each other, directly or around a circle:
/// a reader can start at the bottom of any crate and read up. A module
/// root re-exporting its children (`pub use child::X`) is a door, not a
/// use, and is not counted.
#[test]
fn no_import_circle_between_files() {
    let mut circles = Vec::new();
    for src in crate_sources() {
        let krate = Crate::read(&src);
        let edges = krate.edges();
        for scc in strongly_connected(&edges) {
            if scc.len() > 1 {
                let names: Vec<String> = scc
                    .iter()
                    .map(|p| p.strip_prefix(ROOT).unwrap().display().to_string())
                    .collect();
                circles.push(names.join(" <-> "));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between files:\n{}",
        circles.join("\n")
    );
}

/// No two modules of one crate use each other, directly or around a
/// circle, at any depth: every file counts as the module that holds it at
/// that depth (at depth 1, `store/cursor.rs` is `store`), so `store` ->
/// `audit` -> `state_db` -> `store` is a circle even when no file of one
/// is used by the file it uses back.
#[test]
fn no_import_circle_between_modules_at_any_depth() {
    let mut circles = Vec::new();
    for src in crate_sources() {
        let krate = Crate::read(&src);
        circles.extend(module_circles(&krate, &src));
    }
    assert!(
        circles.is_empty(),
        "import circles between modules:\n{}",
        circles.join("\n")
    );
}

/// The circles between modules of `krate` at every depth, each written as
/// its modules joined by `<->`.
fn module_circles(krate: &Crate, src: &Path) -> Vec<String> {
    let deepest = krate.files.keys().map(Vec::len).max().unwrap_or(0);
    let mut circles = Vec::new();
    for depth in 1..deepest {
        let node = |file: &PathBuf| -> PathBuf {
            let module = module_of(src, file);
            src.join(module[..module.len().min(depth)].join("/"))
        };
        let mut folded: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (from, tos) in krate.edges() {
            for to in tos {
                let (a, b) = (node(from), node(to));
                if a != b {
                    folded.entry(a).or_default().insert(b);
                }
            }
        }
        let edges: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> =
            folded.iter().map(|(k, v)| (k, v.iter().collect())).collect();
        for scc in strongly_connected(&edges) {
            if scc.len() > 1 {
                let mut names: Vec<String> = scc
                    .iter()
                    .map(|p| p.strip_prefix(src).unwrap_or(p).display().to_string())
                    .collect();
                names.sort();
                let circle = format!("{} (depth {depth}): {}", src.display(), names.join(" <-> "));
                if !circles.contains(&circle) {
                    circles.push(circle);
                }
            }
        }
    }
    circles
}

/// The module checker finds a circle of three folders none of whose files
/// use each other back, and none in a chain.
#[test]
fn the_module_circle_checker_sees_a_circle_of_three_folders() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    for (m, uses) in [
        ("a", "crate::b::y::Y"),
        ("b", "crate::c::z::Z"),
        ("c", "crate::a::x::X"),
    ] {
        std::fs::create_dir(src.join(m)).unwrap();
        let child = match m {
            "a" => "x",
            "b" => "y",
            _ => "z",
        };
        std::fs::write(
            src.join(m).join("mod.rs"),
            format!("pub mod {child};\npub mod w;\n"),
        )
        .unwrap();
        std::fs::write(
            src.join(m).join(format!("{child}.rs")),
            format!("pub struct {};\n", child.to_uppercase()),
        )
        .unwrap();
        std::fs::write(
            src.join(m).join("w.rs"),
            format!("fn f() -> {uses} {{ todo!() }}\n"),
        )
        .unwrap();
    }
    let krate = Crate::read(src);
    assert!(
        strongly_connected(&krate.edges()).iter().all(|s| s.len() == 1),
        "no circle between files"
    );
    let circles = module_circles(&krate, src);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("a <-> b <-> c"), "{circles:?}");
    std::fs::write(src.join("c").join("w.rs"), "pub struct W;\n").unwrap();
    assert!(module_circles(&Crate::read(src), src).is_empty());
}

/// Tarjan's algorithm over the file graph.
fn strongly_connected<'a>(edges: &BTreeMap<&'a PathBuf, BTreeSet<&'a PathBuf>>) -> Vec<Vec<&'a PathBuf>> {
    struct State<'a> {
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<&'a PathBuf>>,
    }
    fn visit<'a>(v: &'a PathBuf, edges: &BTreeMap<&'a PathBuf, BTreeSet<&'a PathBuf>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(v, edges, &mut s);
        }
    }
    s.out
}

/// The checker finds a circle when there is one, and none in a chain.
#[test]
fn the_circle_checker_sees_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\npub use a::A;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use super::c::C;\npub struct B;\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "pub struct C;\nfn f() -> crate::A { todo!() }\n",
    )
    .unwrap();
    let krate = Crate::read(src);
    let c = &["c".to_string()];
    let target = krate.resolve(c, &["crate".into(), "A".into()]).unwrap();
    assert!(
        target.ends_with("a.rs"),
        "a re-export is followed to its file: {target:?}"
    );
    let edges = krate.edges();
    assert!(strongly_connected(&edges).iter().any(|s| s.len() == 3));
    std::fs::write(src.join("c.rs"), "pub struct C;\n").unwrap();
    let krate = Crate::read(src);
    let edges = krate.edges();
    assert!(strongly_connected(&edges).iter().all(|s| s.len() == 1));
}

/// Files are sized by their concept: one over 600 lines says in its header
/// (a `//! One concept:` line) why it is one; no module is mounted from
/// elsewhere with `#[path]`.
#[test]
fn files_are_sized_by_their_concept() {
    let mut wrong = Vec::new();
    for src in crate_sources() {
        let mut all = Vec::new();
        rust_files(&src, &mut all);
        for f in all {
            let text = std::fs::read_to_string(&f).unwrap();
            let rel = f.strip_prefix(ROOT).unwrap().display().to_string();
            let lines = text.lines().count();
            if lines > 600
                && !text
                    .lines()
                    .take_while(|l| l.starts_with("//!"))
                    .any(|l| l.starts_with("//! One concept:"))
            {
                wrong.push(format!(
                    "{rel}: {lines} lines and no '//! One concept:' line in its header"
                ));
            }
            if text.contains("#[path") {
                wrong.push(format!("{rel}: a #[path] mount"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The vendors' own modules: every folder of `edc/vendor/`, and
/// `generic.rs`.
fn vendor_modules() -> Vec<String> {
    let dir = Path::new(ROOT).join("crates/core/src/edc/vendor");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.push("generic".into());
    names.sort();
    names
}

/// The core's files outside `under` (relative to `crates/core/src`), or
/// inside it, as (path relative to the root, code without comments and
/// inline tests).
fn core_code(under: &str, inside: bool) -> Vec<(String, String)> {
    let src = Path::new(ROOT).join("crates/core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .filter(|f| f.starts_with(src.join(under)) == inside)
        .map(|f| {
            let rel = f.strip_prefix(ROOT).unwrap().display().to_string();
            (rel, code_of(&std::fs::read_to_string(&f).unwrap()))
        })
        .collect()
}

/// A vendor is its folder: no file outside `edc/vendor/` names a vendor's
/// own module (`vendor::redcap::...`, `vendor::{vault, ...}`). What the rest
/// of the tool uses of a vendor goes through the door, `edc/vendor/mod.rs`,
/// under names of no vendor; the page loop asks the delta kind.
#[test]
fn no_file_outside_the_vendor_folder_names_a_vendors_module() {
    let vendors = vendor_modules();
    assert!(vendors.len() >= 5, "{vendors:?}");
    let mut found = Vec::new();
    for (rel, code) in core_code("edc/vendor", false) {
        for path in paths_in(&code) {
            let named = path
                .windows(2)
                .find(|w| w[0] == "vendor" && vendors.contains(&w[1]))
                .map(|w| w[1].clone());
            if let Some(vendor) = named {
                found.push(format!(
                    "{rel}: {} names the vendor module {vendor}",
                    path.join("::")
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The page loop sequences, sends, lands, commits and audits: it reaches
/// the state through the ledger's seam (no `store::`) and decides nothing
/// by a paging style (no `Paging::` variant), which is the vendor's delta
/// kind's to decide.
#[test]
fn the_page_loop_names_no_store_and_no_paging_style() {
    let mut found = Vec::new();
    for (rel, code) in core_code("sync", true) {
        for path in paths_in(&code) {
            if path.iter().any(|s| s == "store") {
                found.push(format!("{rel}: {}", path.join("::")));
            }
        }
        for (n, line) in code.lines().enumerate() {
            if line.contains("Paging::") {
                found.push(format!("{rel}:{}: a Paging variant", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The simulator is an independent oracle of the vendors' documents: it
/// names nothing of the product, and the product nothing of it outside
/// tests, so a misreading of a document cannot be shared by both.
#[test]
fn the_simulator_and_the_product_share_no_code() {
    let mut found = Vec::new();
    let mut sim = Vec::new();
    rust_files(&Path::new(ROOT).join("crates/sim/src"), &mut sim);
    for file in sim {
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        if code.contains("edc_core") || code.contains("#[path") {
            found.push(file.strip_prefix(ROOT).unwrap().display().to_string());
        }
    }
    for (rel, code) in core_code("", true) {
        if code.contains("edc_sim") {
            found.push(rel);
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// One integration test binary a package (its `tests/*.rs` and
/// `tests/*/main.rs`): each binary is linked again on every change of the
/// crates it uses, and that link is most of a small change's wait.
#[test]
fn one_integration_test_binary_a_package() {
    let mut packages = vec![PathBuf::from(ROOT)];
    for entry in std::fs::read_dir(Path::new(ROOT).join("crates")).unwrap() {
        packages.push(entry.unwrap().path());
    }
    let mut wrong = Vec::new();
    for package in packages {
        let Ok(entries) = std::fs::read_dir(package.join("tests")) else {
            continue;
        };
        let mut binaries: Vec<String> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs") || p.join("main.rs").is_file())
            .map(|p| p.strip_prefix(ROOT).unwrap().display().to_string())
            .collect();
        binaries.sort();
        if binaries.len() > 1 {
            wrong.push(binaries.join(", "));
        }
    }
    assert!(
        wrong.is_empty(),
        "more than one test binary in a package: {}",
        wrong.join("; ")
    );
}

/// The core's public modules, a deliberate list (docs/architecture.md):
/// every other module of `edc-core` is `pub(crate)` or private, and the
/// crate's `unreachable_pub` makes the build refuse a `pub` item nothing
/// outside can reach. A new public module is a decision made here.
const CORE_PUBLIC_MODULES: &[&str] = &[
    "audit",
    "config",
    "config::yaml",
    "digest",
    "durable",
    "edc",
    "edc::payload",
    "error",
    "exit",
    "host",
    "ledger",
    "mask",
    "no_follow",
    "paths",
    "reconcile",
    "record",
    "record::order",
    "redact",
    "run",
    "state_db",
    "state_db::schema",
    "store",
    "stream",
    "sync",
    "sync::window",
];

#[test]
fn the_cores_public_modules_are_the_deliberate_ones() {
    let src = Path::new(ROOT).join("crates/core/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    assert!(
        lib.contains("#![warn(unreachable_pub)]"),
        "crates/core/src/lib.rs no longer sets unreachable_pub"
    );
    let mut all = Vec::new();
    rust_files(&src, &mut all);
    let mut public = BTreeSet::new();
    for f in all {
        let mut module = module_of(&src, &f);
        let text = std::fs::read_to_string(&f).unwrap();
        for line in code_of(&text).lines() {
            let Some(name) = line.trim().strip_prefix("pub mod ") else {
                continue;
            };
            let name = name.trim_end_matches([';', '{', ' ']);
            module.push(name.to_string());
            public.insert(module.join("::"));
            module.pop();
        }
    }
    let wanted: BTreeSet<String> = CORE_PUBLIC_MODULES.iter().map(|m| m.to_string()).collect();
    assert_eq!(
        public, wanted,
        "edc-core's public modules (pub mod) differ from the deliberate list"
    );
}

/// Every repository path the README, docs/ and validation/ name exists:
/// a reader who follows one finds the file.
#[test]
fn every_path_the_docs_name_exists() {
    let root = Path::new(ROOT);
    let mut docs = vec![root.join("README.md")];
    for dir in ["docs", "docs/vendors", "validation"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                docs.push(e.path());
            }
        }
    }
    let mut missing = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (i, _) in text.match_indices(['`', ' ', '(', '\n']) {
            let rest = &text[i + 1..];
            if !["crates/", "src/", "tests/", "scripts/"]
                .iter()
                .any(|p| rest.starts_with(p))
            {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || "_-./".contains(*c))
                .collect();
            let path = path.trim_end_matches(['.', '/']);
            if path.contains('<') || path.contains('*') {
                continue;
            }
            if !root.join(path).exists() {
                missing.push(format!("{}: {path}", doc.strip_prefix(root).unwrap().display()));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Every file the product opens (in runs, `verify`, `audit verify`,
/// `qualify`) goes through `edc_core::no_follow`, the one place that opens
/// a file or lists a directory, and refuses a symbolic link: a link
/// planted in a state, landing or evidence directory would otherwise let a
/// run (often root) read or overwrite any file. So no other code of the
/// shipped binary opens a file itself; its tests may.
#[test]
fn every_file_is_opened_through_the_one_no_follow_module() {
    const OPENS: [&str; 7] = [
        "File::open(",
        "File::create(",
        "OpenOptions::new()",
        "fs::read(",
        "fs::read_to_string(",
        "fs::write(",
        "fs::read_dir(",
    ];
    let root = Path::new(ROOT);
    let the_one = root.join("crates/core/src/no_follow.rs");
    assert!(the_one.is_file(), "{} is the one module", the_one.display());
    let mut found = Vec::new();
    for src in ["src", "crates/core/src", "crates/qualify/src"] {
        let mut files = Vec::new();
        rust_files(&root.join(src), &mut files);
        for file in files {
            if file == the_one || file.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            for (n, line) in code.lines().enumerate() {
                if let Some(open) = OPENS.iter().find(|o| line.contains(*o)) {
                    let rel = file.strip_prefix(root).unwrap().display().to_string();
                    found.push(format!("{rel}:{}: {open}", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "opened without edc_core::no_follow:\n{}",
        found.join("\n")
    );
}
