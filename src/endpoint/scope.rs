//! Scopes: non-blocking operations on borrowed buffers. Every operation started in a scope is
//! over when the scope returns (it waits for those left outstanding, even on a panic), so a
//! buffer borrowed for `'env` is never touched after its borrow ends.

use std::marker::PhantomData;

use super::request::Request;
use super::{Endpoint, Status};
use crate::error::Result;

impl Endpoint {
    /// Runs `f` with a [`Scope`] in which non-blocking operations may borrow buffers; every
    /// operation started in the scope is over when `scope` returns (it waits for those `f` left
    /// outstanding, even if `f` panics), and none touches its buffer any more. `f`'s result, or
    /// the first error of a request it left outstanding: its own (a truncation...), or one its
    /// wait met that was not its own (another peer's malformed message), after which the request
    /// was settled (`settle.rs`: withdrawn, or its transfer finished).
    pub fn scope<'env, R>(&mut self, f: impl for<'s> FnOnce(&mut Scope<'s, 'env>) -> R) -> Result<R> {
        let mut s = Scope { ep: self, outstanding: Vec::new(), _env: PhantomData };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut s)));
        let mut failed = None;
        for req in std::mem::take(&mut s.outstanding) {
            if s.ep.inner.reqs.is_valid(req)
                && let Err(e) = s.ep.inner.wait(req)
            {
                failed.get_or_insert(e);
            }
        }
        match (r, failed) {
            (Ok(v), None) => Ok(v),
            (Ok(_), Some(e)) => Err(e),
            (Err(p), _) => std::panic::resume_unwind(p),
        }
    }
}

/// Non-blocking operations on borrowed buffers (see [`Endpoint::scope`]).
pub struct Scope<'s, 'env> {
    ep: &'s mut Endpoint,
    outstanding: Vec<Request>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'env> Scope<'_, 'env> {
    /// Starts sending `buf`; it is borrowed until the scope ends.
    pub fn isend(&mut self, buf: &'env [u8], dest: u32, tag: i32, context: u32) -> Result<Request> {
        // SAFETY: `buf` is borrowed for `'env`, which outlives the scope, and the scope waits for
        // the request before it returns.
        let r = unsafe { self.ep.isend_raw(buf.as_ptr(), buf.len(), dest, tag, context) }?;
        self.outstanding.push(r);
        Ok(r)
    }

    /// Starts receiving into `buf`; it is borrowed until the scope ends.
    pub fn irecv(&mut self, buf: &'env mut [u8], source: i32, tag: i32, context: u32) -> Result<Request> {
        // SAFETY: `buf` is mutably borrowed for `'env` (nothing else touches it) and the scope
        // waits for the request before it returns.
        let r = unsafe { self.ep.irecv_raw(buf.as_mut_ptr(), buf.len(), source, tag, context) }?;
        self.outstanding.push(r);
        Ok(r)
    }

    /// See [`Endpoint::wait`].
    pub fn wait(&mut self, req: Request) -> Result<Status> {
        self.ep.wait(req)
    }

    /// See [`Endpoint::test`].
    pub fn test(&mut self, req: Request) -> Result<Option<Status>> {
        self.ep.test(req)
    }

    /// See [`Endpoint::wait_all`].
    pub fn wait_all(&mut self, reqs: &[Request]) -> Vec<Result<Status>> {
        self.ep.wait_all(reqs)
    }

    /// See [`Endpoint::wait_any`].
    pub fn wait_any(&mut self, reqs: &[Request]) -> Result<(usize, Result<Status>)> {
        self.ep.wait_any(reqs)
    }

    /// Blocking operations inside the scope: see [`Endpoint::send`].
    pub fn send(&mut self, buf: &[u8], dest: u32, tag: i32, context: u32) -> Result<()> {
        self.ep.send(buf, dest, tag, context)
    }

    /// See [`Endpoint::recv`].
    pub fn recv(&mut self, buf: &mut [u8], source: i32, tag: i32, context: u32) -> Result<Status> {
        self.ep.recv(buf, source, tag, context)
    }

    /// This rank and the job's size.
    pub fn rank_size(&self) -> (u32, u32) {
        (self.ep.rank(), self.ep.size())
    }
}
