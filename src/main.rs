//! The `volley` binary: for now only the embedded target.

fn main() -> std::io::Result<()> {
    volley::server::serve_forever(volley::server::ServerOptions::default())
}
