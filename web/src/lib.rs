//! The browser host of Verity. The Leptos app arrives with its own issue; this crate exists so
//! the workspace has its final shape and the core is checked as a dependency of the web host.
