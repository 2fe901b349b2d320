//! Every integration test of flightdeck-sim, in one test binary: one link instead of
//! 19, and the long tests run beside the short ones.

mod common;
mod faults;
mod faults_aimed;
mod faults_field;
mod faults_network;
mod faults_nodes;
mod guest_opennebula;
mod guest_openstack;
mod guest_support;
mod k8s_api;
mod k8s_eviction;
mod k8s_kubevirt;
mod k8s_support;
mod k8s_workload;
mod kube;
mod member_batch;
mod neutron;
mod nova;
mod octavia;
mod one_faults;
mod one_images;
mod one_support;
mod one_templates;
mod one_vms;
mod pod_cidr;
mod routes;
mod world;
