//! The page's entry point: mounts the app (everything else is in the library).

fn main() {
    verity_web::start();
}
