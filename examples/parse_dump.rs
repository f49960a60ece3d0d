use ragd::parse::{self, render, Format, ParseOptions};
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let f = Format::for_filename(&p).unwrap();
    let doc = parse::parse(f, &bytes, &ParseOptions::default()).unwrap();
    println!("{}", render::to_markdown(&doc));
}
