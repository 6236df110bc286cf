fn main() {
    println!("espgw: not yet wired up");
}
