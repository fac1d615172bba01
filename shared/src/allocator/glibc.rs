//! glibc malloc's knobs and statistics. glibc is in every Rust binary on Linux
//! (C code and the system allocator use it), so these are useful whichever
//! allocator serves Rust's allocations: a test uses them to show that glibc is
//! *not* serving them when another allocator is selected.

/// glibc's view of its heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// Bytes in use by the program (`uordblks + hblkhd`).
    pub in_use: u64,
    /// Bytes obtained from the OS (`arena + hblkhd`).
    pub mapped: u64,
}

/// Read glibc's statistics.
///
/// Uses `mallinfo`, not `mallinfo2`: Lambda binaries are linked against an older
/// glibc (cargo lambda's default) that lacks `mallinfo2`. Its `int` fields are
/// byte counts truncated to 32 bits, so read as unsigned they are exact below
/// 4 GiB per field, enough for these figures.
pub fn info() -> Info {
    // SAFETY: mallinfo has no preconditions and returns a plain struct.
    let m = unsafe { libc::mallinfo() };
    let bytes = |field: libc::c_int| u64::from(field as u32);
    Info {
        in_use: bytes(m.uordblks) + bytes(m.hblkhd),
        mapped: bytes(m.arena) + bytes(m.hblkhd),
    }
}

/// Set one of glibc's malloc parameters.
pub fn mallopt(param: libc::c_int, value: libc::c_int) -> Result<(), String> {
    // SAFETY: mallopt validates its arguments and returns 0 on failure.
    if unsafe { libc::mallopt(param, value) } == 1 {
        Ok(())
    } else {
        Err(format!("mallopt({param}, {value}) was refused"))
    }
}

/// Return free pages at the top of the heap and in free chunks to the OS.
pub fn trim() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}
