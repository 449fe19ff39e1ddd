//! The derive logic, independent of the `proc_macro` entry points so that it can be
//! unit-tested on `proc_macro2` token streams.

pub mod ast;
pub mod attr;
pub mod check;
pub mod ctxt;
pub mod expand;
pub mod symbol;

use proc_macro2::TokenStream;

/// Turns collected errors into `compile_error!` invocations, one per error.
pub fn to_compile_errors(errors: Vec<syn::Error>) -> TokenStream {
    errors.iter().map(syn::Error::to_compile_error).collect()
}
