//! With the `pmix` feature: bindings to the system libpmix, generated against its headers (found
//! with `pkg-config pmix`, else Debian's `/usr/lib/x86_64-linux-gnu/pmix2`), and the link flags.
//! Without it: nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "pmix")]
    pmix::generate();
}

#[cfg(feature = "pmix")]
mod pmix {
    use std::path::PathBuf;
    use std::process::Command;

    /// Include and library directories of libpmix.
    fn locate() -> (Vec<PathBuf>, Vec<PathBuf>) {
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        let out = Command::new("pkg-config").args(["--cflags-only-I", "--libs-only-L", "pmix"]).output();
        if let Ok(o) = out
            && o.status.success()
        {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let inc = text.split_whitespace().filter_map(|w| w.strip_prefix("-I")).map(PathBuf::from).collect();
            let lib = text.split_whitespace().filter_map(|w| w.strip_prefix("-L")).map(PathBuf::from).collect();
            return (inc, lib);
        }
        let debian = PathBuf::from("/usr/lib/x86_64-linux-gnu/pmix2");
        (vec![debian.join("include")], vec![debian.join("lib")])
    }

    pub fn generate() {
        let (inc, lib) = locate();
        if !inc.iter().any(|d| d.join("pmix.h").exists()) {
            panic!(
                "the `pmix` feature needs libpmix's headers (pmix.h): apt-get install libpmix-dev (looked in {inc:?})"
            );
        }
        for d in &lib {
            println!("cargo:rustc-link-search=native={}", d.display());
        }
        println!("cargo:rustc-link-lib=dylib=pmix");
        let mut b = bindgen::Builder::default()
            .header_contents("wrapper.h", "#include <pmix.h>\n")
            .allowlist_function("PMIx_(Init|Finalize|Abort|Put|Commit|Fence|Get|Error_string|Value_destruct|Info_load|Info_destruct|Initialized)")
            .allowlist_type("pmix_(proc|value|info|status|scope|data_type|rank|key)_t")
            .allowlist_var("PMIX_.*")
            .derive_default(true)
            .layout_tests(false)
            .generate_comments(false);
        for d in &inc {
            b = b.clang_arg(format!("-I{}", d.display()));
        }
        let bindings = b.generate().expect("bindgen over pmix.h");
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("pmix_bindings.rs");
        bindings.write_to_file(&out).expect("writing the PMIx bindings");
    }
}
