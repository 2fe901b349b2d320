//! IP networks written as `address/prefix`.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// An IPv4 or IPv6 network whose host bits are zero, e.g. `10.244.0.0/16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR {input:?}: {why}")]
pub struct CidrError {
    input: String,
    why: String,
}

impl Cidr {
    pub fn addr(&self) -> IpAddr {
        self.addr
    }
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies inside this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask_v4(self.prefix);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask_v6(self.prefix);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    /// Whether every address of `other` lies inside this network.
    pub fn covers(&self, other: &Cidr) -> bool {
        other.prefix >= self.prefix && self.contains(other.addr)
    }

    /// The ethertype OpenStack uses for rules on this network.
    pub fn ethertype(&self) -> &'static str {
        match self.addr {
            IpAddr::V4(_) => "IPv4",
            IpAddr::V6(_) => "IPv6",
        }
    }
}

fn mask_v4(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

fn mask_v6(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |why: String| CidrError {
            input: input.to_string(),
            why,
        };
        let (addr, prefix) = input
            .split_once('/')
            .ok_or_else(|| err("expected address/prefix, e.g. 10.244.0.0/16".into()))?;
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| err(format!("{addr:?} is not an IP address")))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| err(format!("prefix length {prefix:?} is not a number")))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(err(format!(
                "prefix length {prefix} is longer than {max}, the size of an {} address",
                if addr.is_ipv4() { "IPv4" } else { "IPv6" }
            )));
        }
        let network = match addr {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask_v4(prefix)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask_v6(prefix)).into()),
        };
        if network != addr {
            return Err(err(format!(
                "host bits are set; the network is {network}/{prefix}"
            )));
        }
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_networks_and_answers_membership() {
        let c: Cidr = "10.244.0.0/16".parse().expect("valid");
        assert!(c.contains("10.244.3.7".parse().expect("ip")));
        assert!(!c.contains("10.245.0.1".parse().expect("ip")));
        assert!(c.covers(&"10.244.8.0/24".parse().expect("valid")));
        assert!(!c.covers(&"10.0.0.0/8".parse().expect("valid")));
    }

    #[test]
    fn rejects_long_prefixes_and_host_bits() {
        let e = "10.0.0.0/33".parse::<Cidr>().expect_err("invalid");
        assert!(e.to_string().contains("longer than 32"), "{e}");
        let e = "10.244.1.0/16".parse::<Cidr>().expect_err("invalid");
        assert!(e.to_string().contains("10.244.0.0/16"), "{e}");
        assert!("fd00::/129".parse::<Cidr>().is_err());
        assert!("banana/8".parse::<Cidr>().is_err());
    }
}
