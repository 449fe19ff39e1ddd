//! Collects every error found while deriving, so one compile reports them all.

use std::cell::RefCell;
use std::fmt::Display;

use quote::ToTokens;

/// The error collector. Must be finished with [`Ctxt::check`].
#[derive(Default)]
pub struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    /// A new, empty collector.
    pub fn new() -> Ctxt {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Records an error spanning `tokens`.
    pub fn error_spanned_by<T: ToTokens, M: Display>(&self, tokens: T, message: M) {
        if let Some(errors) = self.errors.borrow_mut().as_mut() {
            errors.push(syn::Error::new_spanned(tokens.into_token_stream(), message));
        }
    }

    /// Records a syn error as it is.
    pub fn syn_error(&self, error: syn::Error) {
        if let Some(errors) = self.errors.borrow_mut().as_mut() {
            errors.push(error);
        }
    }

    /// Ends collection: `Err` with every error recorded, if any.
    pub fn check(self) -> Result<(), Vec<syn::Error>> {
        let errors = self.errors.borrow_mut().take().unwrap_or_default();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}
