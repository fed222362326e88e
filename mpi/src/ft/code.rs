//! The program's functions (reduction operations, error handlers) across a restart: a function
//! pointer saved as it is would be wrong in the restarted process, whose executable and libraries
//! the loader maps at other addresses (ASLR: a PIE's code moves too).
//!
//! A function is saved as its module (the loader's name for it: `""` for the main program, the
//! path a library was loaded from otherwise) and its offset from the module's load bias
//! (`dlpi_addr` of `dl_iterate_phdr`: the address the module's link-time address 0 was mapped
//! at), with up to 16 bytes of its code. After a restart the module is looked up by name among
//! those loaded, the offset added to its bias, and the code compared: a module no longer loaded,
//! an offset outside its executable segments or other code there (the program was rebuilt) is
//! refused with the reason, never called. Using `dl_iterate_phdr` for both directions (rather
//! than `dladdr`'s `dli_fbase`, the lowest mapped address) keeps one notion of the base.

use std::ffi::{CStr, c_int, c_void};

/// Bytes of a function's code saved to recognise it.
const HEAD: usize = 16;

/// A function of the program, as a restarted process can find it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeRef {
    /// The loader's name of its module (`""`: the main program).
    pub module: String,
    /// Its address minus the module's load bias.
    pub offset: u64,
    /// Its first bytes of code (fewer at the end of a segment, none if unreadable).
    pub head: Vec<u8>,
}

/// One module as `dl_iterate_phdr` shows it: name, load bias and executable segments (start,
/// end, readable).
struct Module {
    name: String,
    bias: usize,
    exec: Vec<(usize, usize, bool)>,
}

/// Every loaded module, in the loader's order (the main program first).
fn modules() -> Vec<Module> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `dl_iterate_phdr` passes a valid `info` for the duration of this call, and
        // `data` is the `Vec` below, borrowed for the whole iteration.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<Module>)) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null `dlpi_name` is a NUL-terminated string of the loader's.
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
        };
        let bias = info.dlpi_addr as usize;
        let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
            &[]
        } else {
            // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers of the module.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let exec = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0)
            .map(|p| {
                let start = bias.wrapping_add(p.p_vaddr as usize);
                (start, start.wrapping_add(p.p_memsz as usize), p.p_flags & libc::PF_R != 0)
            })
            .collect();
        out.push(Module { name, bias, exec });
        0
    }
    let mut out: Vec<Module> = Vec::new();
    // SAFETY: `each` only reads what the loader hands it and pushes to `out`, which outlives the
    // call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut Vec<Module> as *mut c_void) };
    out
}

/// Up to [`HEAD`] bytes of code at `addr`, in a segment ending at `end` (none if unreadable).
fn head_at(addr: usize, end: usize, readable: bool) -> Vec<u8> {
    if !readable {
        return Vec::new();
    }
    let n = HEAD.min(end.saturating_sub(addr));
    // SAFETY: `addr..addr + n` lies inside a mapped, readable segment of a loaded module.
    unsafe { std::slice::from_raw_parts(addr as *const u8, n) }.to_vec()
}

/// Where function `addr` is, for a restarted process ([`resolve`]).
pub fn locate(addr: usize) -> Result<CodeRef, String> {
    for (k, m) in modules().into_iter().enumerate() {
        if let Some(&(_, end, readable)) = m.exec.iter().find(|&&(s, e, _)| (s..e).contains(&addr)) {
            // Only the first module (the main program) may be nameless: another one could not
            // be found again.
            if m.name.is_empty() && k != 0 {
                return Err(format!("the function at {addr:#x} is in a module without a name"));
            }
            let offset = addr.wrapping_sub(m.bias) as u64;
            return Ok(CodeRef { module: m.name, offset, head: head_at(addr, end, readable) });
        }
    }
    Err(format!("the function at {addr:#x} is in no loaded module's code"))
}

/// The address of function `r` in this process ([`locate`]), or why it cannot be used.
pub fn resolve(r: &CodeRef) -> Result<usize, String> {
    let which = || if r.module.is_empty() { "the main program".to_owned() } else { r.module.clone() };
    let all = modules();
    let m = if r.module.is_empty() { all.first() } else { all.iter().find(|m| m.name == r.module) };
    let m = m.ok_or_else(|| format!("{} is no longer loaded", which()))?;
    let addr = m.bias.wrapping_add(r.offset as usize);
    let Some(&(_, end, readable)) = m.exec.iter().find(|&&(s, e, _)| (s..e).contains(&addr)) else {
        return Err(format!("offset {:#x} is outside {}'s code", r.offset, which()));
    };
    if !r.head.is_empty() && head_at(addr, end, readable) != r.head {
        return Err(format!("other code at offset {:#x} of {} (was it rebuilt?)", r.offset, which()));
    }
    Ok(addr)
}

impl CodeRef {
    /// Saves it.
    pub fn put(&self, w: &mut super::wire::Writer) {
        w.str(&self.module);
        w.u64(self.offset);
        w.bytes(&self.head);
    }

    /// Reads one [`put`](Self::put).
    pub fn get(r: &mut super::wire::Reader) -> Result<CodeRef, super::wire::Bad> {
        Ok(CodeRef { module: r.string()?, offset: r.u64()?, head: r.bytes()?.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn sample(x: c_int) -> c_int {
        x.wrapping_mul(3)
    }

    #[test]
    fn a_function_is_found_again_and_moved_code_is_refused() {
        let f = sample as extern "C" fn(c_int) -> c_int as usize;
        let r = locate(f).unwrap();
        assert_eq!(resolve(&r), Ok(f));
        // A libc function: its module has a name.
        let g = libc::strlen as unsafe extern "C" fn(*const libc::c_char) -> usize as usize;
        let lr = locate(g).unwrap();
        assert!(!lr.module.is_empty());
        assert_eq!(resolve(&lr), Ok(g));
        let gone = CodeRef { module: "/nowhere/libgone.so".into(), ..lr.clone() };
        assert!(resolve(&gone).unwrap_err().contains("no longer loaded"));
        let mut changed = r.clone();
        changed.head[0] ^= 0xff;
        assert!(resolve(&changed).unwrap_err().contains("rebuilt"));
        let outside = CodeRef { offset: u64::MAX / 2, ..r };
        assert!(resolve(&outside).unwrap_err().contains("outside"));
        assert!(locate(0).is_err());
    }
}
