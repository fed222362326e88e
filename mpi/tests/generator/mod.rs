//! The generator of the C interface: reads `mpi/api/mpi.api` (the MPI-4.1 C functions, from the
//! MPI Forum's `pympistandard`, by `mpi/api/extract.py`) and `mpi/api/bind/*.txt` (one binding per
//! implemented function) and writes `mpi/src/gen/exports.rs` (every function as `MPI_X` and
//! `PMPI_X` through the macros of `mpi/src/exports.rs`; a function without a binding is a stub
//! reporting `MPI_ERR_UNSUPPORTED_OPERATION`), the prototype block of `mpi/include/mpi.h`, the
//! function list of `mpi/README.md` and `mpi/api/status.txt`.
//!
//! The habit is MPICH's `maint/gen_binding_c.py`: one description, generated code checked in
//! beside its generator, a test that the output is current (`tests/generated.rs`).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

/// What a line of `mpi.api` declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// A function of MPI-4.1.
    Fn,
    /// An MPI-1 function MPI-3.0 removed that MPICH 4.x still exports.
    Removed,
    /// A callback typedef.
    Callback,
    /// A predefined callback (`MPI_COMM_DUP_FN`...).
    Predefined,
}

/// One parameter: its C declaration split up.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    /// The C type as written before the name, `*`s included (`const void*`).
    pub ctype: String,
    /// What follows the name (`[]`, `[][3]`).
    pub suffix: String,
}

/// One declaration of `mpi.api`.
#[derive(Clone, Debug)]
pub struct Decl {
    pub tag: Tag,
    pub ret: String,
    pub name: String,
    pub params: Vec<Param>,
    /// Ends with `...`.
    pub varargs: bool,
}

/// Parses `mpi.api`.
pub fn parse_api(text: &str) -> Result<Vec<Decl>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |m: &str| format!("mpi.api:{}: {m}: {line}", i + 1);
        let (tag, rest) = line.split_once(' ').ok_or_else(|| err("no tag"))?;
        let tag = match tag {
            "fn" => Tag::Fn,
            "removed" => Tag::Removed,
            "callback" => Tag::Callback,
            "predefined" => Tag::Predefined,
            _ => return Err(err("unknown tag")),
        };
        let rest = rest.strip_prefix("typedef ").unwrap_or(rest);
        let (head, args) = rest.split_once('(').ok_or_else(|| err("no parameters"))?;
        let args = args.strip_suffix(')').ok_or_else(|| err("no closing parenthesis"))?;
        let (ret, name) = head.trim().rsplit_once(' ').ok_or_else(|| err("no return type"))?;
        let mut params = Vec::new();
        let mut varargs = false;
        for a in args.split(", ").map(str::trim).filter(|a| !a.is_empty() && *a != "void") {
            if a == "..." {
                varargs = true;
                continue;
            }
            let (ctype, name) = a.rsplit_once(' ').ok_or_else(|| err("a parameter without a name"))?;
            let (name, suffix) = match name.find('[') {
                Some(at) => (&name[..at], &name[at..]),
                None => (name, ""),
            };
            params.push(Param { name: name.into(), ctype: ctype.trim().into(), suffix: suffix.into() });
        }
        out.push(Decl { tag, ret: ret.trim().into(), name: name.into(), params, varargs });
    }
    Ok(out)
}

/// The Rust type of a callback typedef passed by pointer.
fn callback_type(name: &str) -> Option<&'static str> {
    Some(match name {
        "MPI_Comm_copy_attr_function"
        | "MPI_Type_copy_attr_function"
        | "MPI_Win_copy_attr_function"
        | "MPI_Copy_function" => "crate::attr::CopyFn",
        "MPI_Comm_delete_attr_function"
        | "MPI_Type_delete_attr_function"
        | "MPI_Win_delete_attr_function"
        | "MPI_Delete_function" => "crate::attr::DeleteFn",
        "MPI_Comm_errhandler_function" | "MPI_Win_errhandler_function" | "MPI_Session_errhandler_function" => {
            "crate::errh::ErrFn"
        }
        "MPI_File_errhandler_function" => "crate::abi::FileErrFn",
        "MPI_User_function" => "crate::op::UserFn",
        "MPI_User_function_c" => "crate::abi::UserFnC",
        "MPI_Grequest_query_function" => "crate::abi::GrequestQueryFn",
        "MPI_Grequest_free_function" => "crate::abi::GrequestFreeFn",
        "MPI_Grequest_cancel_function" => "crate::abi::GrequestCancelFn",
        "MPI_Datarep_conversion_function" => "crate::abi::DatarepConversionFn",
        "MPI_Datarep_conversion_function_c" => "crate::abi::DatarepConversionFnC",
        "MPI_Datarep_extent_function" => "crate::abi::DatarepExtentFn",
        "MPI_T_event_cb_function" => "crate::abi::TEventCbFn",
        "MPI_T_event_dropped_cb_function" => "crate::abi::TEventDroppedCbFn",
        "MPI_T_event_free_cb_function" => "crate::abi::TEventFreeCbFn",
        _ => return None,
    })
}

/// The Rust type of a C base type (no pointer).
fn base_type(c: &str) -> Result<&'static str, String> {
    Ok(match c {
        "int" => "c_int",
        "char" => "c_char",
        "void" => "c_void",
        "double" => "f64",
        "MPI_Comm" => "Comm",
        "MPI_Datatype" => "Datatype",
        "MPI_Op" => "Op",
        "MPI_Request" => "Request",
        "MPI_Message" => "Message",
        "MPI_Errhandler" => "Errhandler",
        "MPI_Group" => "Group",
        "MPI_Info" => "Info",
        "MPI_Status" => "Status",
        "MPI_Aint" => "Aint",
        "MPI_Count" => "Count",
        "MPI_Offset" => "Offset",
        "MPI_Fint" => "Fint",
        "MPI_Win" => "Win",
        "MPI_File" => "File",
        "MPI_Session" => "Session",
        "MPI_F08_status" => "F08Status",
        "MPI_T_enum" => "TEnum",
        "MPI_T_cvar_handle" => "TCvarHandle",
        "MPI_T_pvar_handle" => "TPvarHandle",
        "MPI_T_pvar_session" => "TPvarSession",
        "MPI_T_event_registration" => "TEventRegistration",
        "MPI_T_event_instance" => "TEventInstance",
        "MPI_T_cb_safety" | "MPI_T_source_order" => "c_int",
        _ => return Err(format!("no Rust type for the C type {c}")),
    })
}

/// The Rust type of a parameter: `const` binds the innermost pointer, `[]` is one more pointer,
/// `[][3]` a pointer to arrays of 3, a callback typedef an `Option` of its function pointer.
pub fn rust_type(p: &Param) -> Result<String, String> {
    let (is_const, t) = match p.ctype.strip_prefix("const ") {
        Some(t) => (true, t),
        None => (false, p.ctype.as_str()),
    };
    let mut stars = t.chars().filter(|&c| c == '*').count() + p.suffix.matches("[]").count();
    let base = t.trim_end_matches('*').trim();
    let mut rust = match callback_type(base) {
        Some(f) => {
            // A function type parameter decays to a pointer (`MPI_T_event_cb_function f`).
            stars = stars.saturating_sub(1);
            format!("Option<{f}>")
        }
        None => base_type(base)?.to_string(),
    };
    if p.suffix.ends_with("[3]") {
        rust = format!("[{rust}; 3]");
    }
    for level in 0..stars {
        rust = format!("*{} {rust}", if is_const && level == 0 { "const" } else { "mut" });
    }
    Ok(rust)
}

/// How a bound function is defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `|acc| body` through `mpi!`.
    Call,
    /// `fast |st| .., slow |acc| ..` through `mpi_fast!`.
    Fast,
    /// `fused .., fast |st| .., slow |acc| ..` through `mpi_fused!`.
    Fused,
    /// `plain body`: a function not returning `int`, through `mpi_plain!`.
    Plain,
}

/// One binding of a bind file.
#[derive(Clone, Debug)]
pub struct Binding {
    pub name: String,
    pub kind: Kind,
    /// The text after `=>`, without the final `;`.
    pub body: String,
    /// The bind file's stem (`p2p`).
    pub area: String,
}

/// Parses a bind file: entries `MPI_Name => body;` where an entry ends at a line ending with `;`
/// outside brackets; `#` lines are comments.
pub fn parse_bind(area: &str, text: &str) -> Result<Vec<Binding>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if cur.is_empty() {
            start = i + 1;
        } else {
            cur.push('\n');
        }
        cur.push_str(line.trim_end());
        let depth: i64 = cur
            .chars()
            .map(|c| match c {
                '(' | '{' | '[' => 1,
                ')' | '}' | ']' => -1,
                _ => 0,
            })
            .sum();
        if depth == 0 && t.ends_with(';') {
            let entry = std::mem::take(&mut cur);
            let err = |m: &str| format!("bind/{area}.txt:{start}: {m}");
            let (name, body) = entry.split_once("=>").ok_or_else(|| err("no `=>`"))?;
            let body = body.trim().strip_suffix(';').unwrap().trim_end();
            let kind = if body.starts_with("fused ") {
                Kind::Fused
            } else if body.starts_with("fast ") {
                Kind::Fast
            } else if let Some(b) = body.strip_prefix("plain ") {
                out.push(Binding { name: name.trim().into(), kind: Kind::Plain, body: b.into(), area: area.into() });
                continue;
            } else if body.starts_with('|') {
                Kind::Call
            } else {
                return Err(err("the body starts with none of `|acc|`, `fast`, `fused`, `plain`"));
            };
            out.push(Binding { name: name.trim().into(), kind, body: body.into(), area: area.into() });
        }
    }
    if !cur.trim().is_empty() {
        return Err(format!("bind/{area}.txt:{start}: an entry without its final `;`"));
    }
    Ok(out)
}

/// The inputs, read from `mpi/`.
pub struct Inputs {
    pub decls: Vec<Decl>,
    /// By function name.
    pub bindings: BTreeMap<String, Binding>,
    /// Areas in file order, each with its bindings in file order.
    pub areas: Vec<(String, Vec<String>)>,
}

pub fn read_inputs(mpi: &Path) -> Result<Inputs, String> {
    let api = std::fs::read_to_string(mpi.join("api/mpi.api")).map_err(|e| format!("mpi/api/mpi.api: {e}"))?;
    let decls = parse_api(&api)?;
    let known: HashMap<&str, &Decl> =
        decls.iter().filter(|d| matches!(d.tag, Tag::Fn | Tag::Removed)).map(|d| (d.name.as_str(), d)).collect();
    let mut files: Vec<_> = std::fs::read_dir(mpi.join("api/bind"))
        .map_err(|e| format!("mpi/api/bind: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut bindings = BTreeMap::new();
    let mut areas = Vec::new();
    for f in files {
        let area = f.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let mut names = Vec::new();
        for b in parse_bind(&area, &text)? {
            let Some(d) = known.get(b.name.as_str()) else {
                return Err(format!("bind/{area}.txt: {} is not a function of mpi/api/mpi.api", b.name));
            };
            if (d.ret == "int") == (b.kind == Kind::Plain) {
                return Err(format!(
                    "bind/{area}.txt: {} returns {}: bind it {}",
                    b.name,
                    d.ret,
                    if d.ret == "int" { "with `|acc|`, `fast` or `fused`" } else { "with `plain`" }
                ));
            }
            if let Some(old) = bindings.insert(b.name.clone(), b.clone()) {
                return Err(format!("{} is bound twice: in bind/{}.txt and bind/{area}.txt", b.name, old.area));
            }
            names.push(b.name);
        }
        areas.push((area, names));
    }
    Ok(Inputs { decls, bindings, areas })
}

/// The C and PMPI functions of the interface, in `mpi.api`'s order.
pub fn functions(inp: &Inputs) -> impl Iterator<Item = &Decl> {
    inp.decls.iter().filter(|d| matches!(d.tag, Tag::Fn | Tag::Removed))
}

fn rust_params(d: &Decl) -> Result<String, String> {
    let ps: Result<Vec<String>, String> = d
        .params
        .iter()
        .map(|p| rust_type(p).map(|t| format!("{}: {t}", p.name)).map_err(|e| format!("{}: {e}", d.name)))
        .collect();
    Ok(ps?.join(", "))
}

fn pname(name: &str) -> String {
    format!("P{name}")
}

const GENERATED_BY: &str = "`NEMESIS_BLESS=1 cargo test -p nemesis-mpi --test generated`";

/// `mpi/src/gen/exports.rs`.
pub fn exports_rs(inp: &Inputs) -> Result<String, String> {
    let decl: HashMap<&str, &Decl> = functions(inp).map(|d| (d.name.as_str(), d)).collect();
    let mut s = String::new();
    writeln!(s, "// @generated by {GENERATED_BY} from mpi/api/mpi.api and mpi/api/bind/*.txt:").unwrap();
    writeln!(s, "// do not edit. Included by mpi/src/exports.rs, whose macros and imports it uses.").unwrap();
    let line = |b: &Binding| -> Result<String, String> {
        let d = decl[b.name.as_str()];
        let body = b.body.replace('\n', "\n    ");
        Ok(match b.kind {
            Kind::Plain => {
                let ret = base_type(&d.ret)?;
                format!("    fn {} / {}({}) -> {ret} => {body};\n", d.name, pname(&d.name), rust_params(d)?)
            }
            _ => format!("    fn {} / {}({}) => {body};\n", d.name, pname(&d.name), rust_params(d)?),
        })
    };
    for (kind, mac) in
        [(Kind::Fused, "mpi_fused"), (Kind::Fast, "mpi_fast"), (Kind::Call, "mpi"), (Kind::Plain, "mpi_plain")]
    {
        for (area, names) in &inp.areas {
            let these: Vec<&Binding> = names.iter().map(|n| &inp.bindings[n]).filter(|b| b.kind == kind).collect();
            if these.is_empty() {
                continue;
            }
            writeln!(s, "\n// mpi/api/bind/{area}.txt\n{mac}! {{").unwrap();
            for b in these {
                s.push_str(&line(b)?);
            }
            s.push_str("}\n");
        }
    }
    writeln!(s, "\n// Not implemented yet: MPI_ERR_UNSUPPORTED_OPERATION through the error handler.\nmpi_stub! {{")
        .unwrap();
    for d in functions(inp).filter(|d| !inp.bindings.contains_key(&d.name)) {
        if d.ret != "int" {
            return Err(format!("{} returns {}: a stub cannot; bind it with `plain`", d.name, d.ret));
        }
        writeln!(s, "    fn {} / {}({});", d.name, pname(&d.name), rust_params(d)?).unwrap();
    }
    s.push_str("}\n");
    Ok(s)
}

/// A C declaration: `const void *buf`. An array of statuses is written as a pointer (the same
/// type): `MPI_STATUSES_IGNORE` is `(MPI_Status *)1`, which GCC's `-Wstringop-overflow` refuses
/// for an array parameter.
fn c_param(p: &Param) -> String {
    let mut stars = p.ctype.chars().filter(|&c| c == '*').count();
    let base = p.ctype.trim_end_matches('*').trim();
    let mut suffix = p.suffix.as_str();
    if base.ends_with("MPI_Status") && suffix == "[]" {
        stars += 1;
        suffix = "";
    }
    format!("{base} {}{}{suffix}", "*".repeat(stars), p.name)
}

fn c_proto(d: &Decl, prefix: &str) -> String {
    let mut ps: Vec<String> = d.params.iter().map(c_param).collect();
    if d.varargs {
        ps.push("...".into());
    }
    let ps = if ps.is_empty() { "void".to_string() } else { ps.join(", ") };
    format!("{} {prefix}{}({ps});\n", d.ret, d.name)
}

pub const H_BEGIN: &str = "/* BEGIN GENERATED";
pub const H_END: &str = "/* END GENERATED */";

/// The prototype block of `mpi.h`, markers included.
pub fn header_block(inp: &Inputs) -> String {
    let mut s = format!(
        "{H_BEGIN} by {GENERATED_BY} from mpi/api/mpi.api: every function of\n * MPI-4.1 (and the MPI-1 ones MPICH \
         still exports), then its profiling twin. Do not edit. */\n"
    );
    for d in functions(inp) {
        s.push_str(&c_proto(d, ""));
    }
    s.push_str("\n/* The profiling interface: every function above as PMPI_. */\n");
    for d in functions(inp) {
        s.push_str(&c_proto(d, "P"));
    }
    s.push_str(H_END);
    s
}

/// The family of a function, for the lists of stubs.
pub fn family(name: &str) -> &'static str {
    let n = name.strip_prefix("MPI_").unwrap_or(name);
    let rma = [
        "Put",
        "Get",
        "Accumulate",
        "Get_accumulate",
        "Fetch_and_op",
        "Compare_and_swap",
        "Rput",
        "Rget",
        "Raccumulate",
        "Rget_accumulate",
    ];
    let dynproc = [
        "Comm_spawn",
        "Comm_spawn_multiple",
        "Comm_accept",
        "Comm_connect",
        "Open_port",
        "Close_port",
        "Publish_name",
        "Unpublish_name",
        "Lookup_name",
        "Comm_join",
        "Comm_get_parent",
        "Comm_disconnect",
    ];
    let base = n.strip_suffix("_c").unwrap_or(n);
    if n.starts_with("File_") || n.starts_with("Register_datarep") {
        "I/O"
    } else if n.starts_with("Win_") || rma.contains(&base) {
        "one-sided"
    } else if n.starts_with("T_") {
        "tools (MPI_T)"
    } else if n.starts_with("Session_") || n.contains("_from_group") || n == "Group_from_session_pset" {
        "sessions"
    } else if dynproc.contains(&n) {
        "dynamic processes"
    } else if ["Psend_init", "Precv_init", "Pready", "Pready_range", "Pready_list", "Parrived"].contains(&n) {
        "partitioned"
    } else if base.ends_with("_init")
        && !["Send_init", "Ssend_init", "Bsend_init", "Rsend_init", "Recv_init", "Init"].contains(&base)
    {
        "persistent collectives"
    } else if n.ends_with("_c") {
        "large counts (`_c`)"
    } else {
        "other"
    }
}

pub const R_BEGIN: &str = "<!-- BEGIN GENERATED function list";
pub const R_END: &str = "<!-- END GENERATED -->";

/// The function list of `mpi/README.md`, markers included.
pub fn readme_block(inp: &Inputs) -> String {
    let all: Vec<&Decl> = functions(inp).collect();
    let bound = all.iter().filter(|d| inp.bindings.contains_key(&d.name)).count();
    let mut s = format!("{R_BEGIN} ({GENERATED_BY}): do not edit -->\n");
    writeln!(
        s,
        "{} functions, each as `MPI_X` and `PMPI_X`: the {} of MPI-4.1's C interface (`mpi/api/mpi.api`) and \
         the MPI-1 calls MPICH still exports. {bound} are implemented; the other {} are stubs returning \
         `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler.\n",
        all.len(),
        all.iter().filter(|d| d.tag == Tag::Fn).count(),
        all.len() - bound
    )
    .unwrap();
    s.push_str("Implemented, by area (`mpi/api/bind/<area>.txt`):\n\n");
    for (area, names) in &inp.areas {
        if names.is_empty() {
            continue;
        }
        let mut names = names.clone();
        names.sort();
        let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        writeln!(s, "- {area}: {}", list.join(", ")).unwrap();
    }
    s.push_str("\nStubs, by family:\n\n");
    let mut fams: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in all.iter().filter(|d| !inp.bindings.contains_key(&d.name)) {
        fams.entry(family(&d.name)).or_default().push(&d.name);
    }
    for (fam, names) in fams {
        let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        writeln!(s, "- {fam} ({}): {}", names.len(), list.join(", ")).unwrap();
    }
    s.push_str(R_END);
    s
}

/// `text` with the part from the line starting with `begin` to `end` (included) replaced by `block`.
pub fn splice(text: &str, begin: &str, end: &str, block: &str) -> Result<String, String> {
    let from = text.find(begin).ok_or_else(|| format!("no `{begin}` marker"))?;
    let to = from + text[from..].find(end).ok_or_else(|| format!("no `{end}` marker"))? + end.len();
    Ok(format!("{}{block}{}", &text[..from], &text[to..]))
}

/// `mpi/api/status.txt`: how much of the interface is implemented, and the stubs by family.
pub fn status_txt(inp: &Inputs) -> String {
    let all: Vec<&Decl> = functions(inp).collect();
    let stubs: Vec<&Decl> = all.iter().copied().filter(|d| !inp.bindings.contains_key(&d.name)).collect();
    let mut fams: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in &stubs {
        fams.entry(family(&d.name)).or_default().push(&d.name);
    }
    let mut s = format!("# mpi/api/status.txt, written by {GENERATED_BY}: do not edit.\n");
    writeln!(s, "exported: {} functions, each as MPI_ and PMPI_ ({} symbols)", all.len(), 2 * all.len()).unwrap();
    writeln!(s, "  of MPI-4.1: {}", all.iter().filter(|d| d.tag == Tag::Fn).count()).unwrap();
    writeln!(s, "  removed MPI-1 calls MPICH exports: {}", all.iter().filter(|d| d.tag == Tag::Removed).count())
        .unwrap();
    writeln!(s, "implemented: {}", all.len() - stubs.len()).unwrap();
    writeln!(s, "stubs (MPI_ERR_UNSUPPORTED_OPERATION): {}", stubs.len()).unwrap();
    for (fam, names) in &fams {
        writeln!(s, "  {fam}: {}", names.len()).unwrap();
    }
    writeln!(s, "implemented, by bind file:").unwrap();
    for (area, names) in &inp.areas {
        writeln!(s, "  {area}: {}", names.len()).unwrap();
    }
    for (fam, names) in &fams {
        writeln!(s, "\n[stubs: {fam}]").unwrap();
        for n in names {
            writeln!(s, "{n}").unwrap();
        }
    }
    s
}
