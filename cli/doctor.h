/* `kgate doctor` (cli/doctor.c). */
#ifndef KG_DOCTOR_H
#define KG_DOCTOR_H
int kg_cmd_doctor(int argc, char **argv);
#endif
