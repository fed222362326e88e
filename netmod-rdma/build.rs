//! With the `libfabric` feature: bindings generated against the system's libfabric headers
//! (bindgen), and the C shim for libfabric's `static inline` calls (cc). Without it: nothing.

fn main() {
    #[cfg(feature = "libfabric")]
    libfabric();
}

#[cfg(feature = "libfabric")]
fn libfabric() {
    use std::path::PathBuf;
    println!("cargo:rerun-if-changed=src/sys/shim.c");
    println!("cargo:rerun-if-changed=src/sys/wrapper.h");
    cc::Build::new().file("src/sys/shim.c").warnings(true).compile("nemesis_fi_shim");
    println!("cargo:rustc-link-lib=fabric");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let shim_fns = [
        "int nm_domain(struct fid_fabric *, struct fi_info *, struct fid_domain **, void *);",
        "int nm_endpoint(struct fid_domain *, struct fi_info *, struct fid_ep **, void *);",
        "int nm_cq_open(struct fid_domain *, struct fi_cq_attr *, struct fid_cq **, void *);",
        "int nm_av_open(struct fid_domain *, struct fi_av_attr *, struct fid_av **, void *);",
        "int nm_ep_bind(struct fid_ep *, struct fid *, uint64_t);",
        "int nm_enable(struct fid_ep *);",
        "int nm_close(struct fid *);",
        "int nm_getname(struct fid *, void *, size_t *);",
        "int nm_av_insert(struct fid_av *, const void *, size_t, fi_addr_t *, uint64_t, void *);",
        "ssize_t nm_tsend(struct fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, void *);",
        "ssize_t nm_tinject(struct fid_ep *, const void *, size_t, fi_addr_t, uint64_t);",
        "ssize_t nm_trecv(struct fid_ep *, void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *);",
        "ssize_t nm_read(struct fid_ep *, void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *);",
        "ssize_t nm_cancel(struct fid *, void *);",
        "ssize_t nm_cq_read(struct fid_cq *, void *, size_t);",
        "ssize_t nm_cq_readerr(struct fid_cq *, struct fi_cq_err_entry *, uint64_t);",
        "const char *nm_cq_strerror(struct fid_cq *, int, const void *, char *, size_t);",
        "int nm_mr_reg(struct fid_domain *, const void *, size_t, uint64_t, uint64_t, uint64_t, uint64_t, struct fid_mr **, void *);",
        "int nm_mr_bind(struct fid_mr *, struct fid *, uint64_t);",
        "int nm_mr_enable(struct fid_mr *);",
        "void *nm_mr_desc(struct fid_mr *);",
        "uint64_t nm_mr_key(struct fid_mr *);",
        "ssize_t nm_write(struct fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *, uint64_t);",
        "ssize_t nm_rma_read(struct fid_ep *, void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *);",
        "ssize_t nm_atomic(struct fid_ep *, const void *, size_t, fi_addr_t, uint64_t, uint64_t, int, int, void *, uint64_t);",
        "ssize_t nm_fetch_atomic(struct fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, int, int, void *);",
        "ssize_t nm_compare_atomic(struct fid_ep *, const void *, size_t, const void *, void *, fi_addr_t, uint64_t, uint64_t, int, int, void *);",
        "int nm_atomicvalid(struct fid_ep *, int, int, int, size_t *);",
    ];
    let header = format!("#include \"src/sys/wrapper.h\"\n{}\n", shim_fns.join("\n"));
    let bindings = bindgen::Builder::default()
        .header_contents("nemesis_fi.h", &header)
        .clang_arg(format!("-I{}", std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")))
        .allowlist_function("nm_.*|fi_getinfo|fi_freeinfo|fi_dupinfo|fi_fabric|fi_strerror|fi_version|fi_tostr")
        .allowlist_type("fi_.*|fid_.*")
        .allowlist_var("FI_.*")
        .parse_callbacks(Box::new(Flags))
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!("bindgen on the libfabric headers (libfabric-dev and libclang-dev installed?): {e}")
        });
    bindings.write_to_file(out.join("bindings.rs")).expect("writing the bindings");
}

/// Every `FI_*` macro constant as `u64` (flags are 64-bit; bindgen would fit small ones in `u32`).
#[cfg(feature = "libfabric")]
#[derive(Debug)]
struct Flags;

#[cfg(feature = "libfabric")]
impl bindgen::callbacks::ParseCallbacks for Flags {
    fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
        name.starts_with("FI_").then_some(bindgen::callbacks::IntKind::U64)
    }
}
