//! What runs a check's requests ([`Model`]): a leaf the check and the engine's table both name.

use std::rc::Rc;

use verity_core::claim::AssessMode;
use verity_core::provider::Provider;

/// What runs a check's requests, read once from its provider's JSON: for all the checks of a
/// page's message, or for a check resumed from storage.
#[derive(Debug, Clone)]
pub(super) enum Model {
    /// The offline baseline.
    Offline,
    /// A provider over the network, and the assess route its configuration chooses (the local
    /// presets: the verifier route).
    Network { provider: Rc<Provider>, assess: AssessMode },
    /// The provider cannot run (a field the core refuses, a key that would go in the clear, a
    /// forged saved record): its checks end refused, saying why, before anything is sent.
    Refused(String),
}
