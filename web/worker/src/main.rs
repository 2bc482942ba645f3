//! The worker's wasm: `main` starts the engine in the browser's worker scope. On other targets
//! it does nothing (the engine is the library, tested natively).

fn main() {
    #[cfg(target_arch = "wasm32")]
    verity_worker::start();
}
