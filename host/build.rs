//! Rebuild when the embedded skeleton changes (`include_dir!` does not notice new files).
fn main() {
    println!("cargo:rerun-if-changed=../skeleton");
    println!("cargo:rerun-if-changed=../spec");
}
